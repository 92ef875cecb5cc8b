"""A worker of a multi-host slice: what each worker's commands carry (its JAX process id, every hostname, the
coordinator), which steps run where, and the seed's single-host commands unchanged."""

import pytest

from workload.core.config import ConfigError, PipelineConfig
from workload.launch.jax_process import ONE_HOST, JaxProcess
from workload.run import commands, pipeline
from workload.run.layout import Layout

HOSTS = ("tpu-sft-dev-01", "tpu-sft-dev-02", "tpu-sft-dev-03", "tpu-sft-dev-04")


def build(config, worker):
    layout = Layout("/dev/shm", "gs://b/kept", config.model, "run", "gs://b/runs")
    return {c.step: c for c in commands.pipeline_commands(config, layout, commands.OnHost("python3", "h", worker))}


@pytest.mark.parametrize("worker_id", [0, 3])
def test_each_tpu_worker_trains_with_its_own_id_every_hostname_and_no_metadata_server(worker_id):
    built = build(PipelineConfig(accelerator_type="v6e-16"), JaxProcess(worker_id, HOSTS))
    train = built["train"].env
    assert train["TPU_WORKER_ID"] == str(worker_id)
    assert train["TPU_WORKER_HOSTNAMES"] == ",".join(HOSTS)  # JAX's coordinator: the first, on every worker
    assert train["TPU_SKIP_MDS_QUERY"] == "1"  # JAX reads these, not the metadata server
    assert (train["TPU_ACCELERATOR_TYPE"], train["TPU_TOPOLOGY"], train["TPU_HOST_BOUNDS"]) == (
        "v6e-16",
        "4x4",
        "2,2,1",
    )
    assert "skip_jax_distributed_system=true" not in built["train"].argv


def test_one_process_steps_on_a_slice_host_stay_off_the_tpu_runtime():
    """Alone on one host of a slice, the TPU runtime would wait for the other hosts."""
    config = PipelineConfig(accelerator_type="v6e-16")
    leader = build(config, JaxProcess(0, HOSTS))
    for step in ("convert", "export"):
        assert leader[step].env["JAX_PLATFORMS"] == "cpu"
        assert not any(key.startswith("TPU_") for key in leader[step].env)
    assert {"hardware=cpu", "skip_jax_distributed_system=true"} <= set(leader["export"].argv)
    layout = Layout("/dev/shm", "gs://b/kept", config.model, "run", "gs://b/runs")
    parity = commands.logit_parity(config, layout, commands.OnHost(worker=JaxProcess(0, HOSTS)))
    assert parity.env["JAX_PLATFORMS"] == "cpu"
    assert {"hardware=cpu", "skip_jax_distributed_system=true"} <= set(parity.argv)


def test_only_worker_0_exports():
    assert list(build(PipelineConfig(accelerator_type="v6e-16"), JaxProcess(1, HOSTS))) == ["convert", "train"]
    assert list(build(PipelineConfig(accelerator_type="v6e-16"), JaxProcess(0, HOSTS))) == [
        "convert",
        "train",
        "export",
    ]


@pytest.mark.parametrize("worker_id", [0, 1])
def test_the_tiny_profile_joins_maxtexts_cpu_processes_into_one_job(worker_id):
    train = build(PipelineConfig(profile="tiny"), JaxProcess(worker_id, HOSTS[:2]))["train"]
    assert "skip_jax_distributed_system=false" in train.argv and "hardware=cpu" in train.argv
    # gloo's 30 s is no limit of the chips it stands in for: Orbax's barriers wait on the coordination service
    assert "--experimental_orbax_use_distributed_barrier=true" in train.argv
    one_host = build(PipelineConfig(profile="tiny"), JaxProcess())["train"]
    assert not any(arg.startswith("--experimental_orbax") for arg in one_host.argv)
    assert {
        k: train.env[k]
        for k in (
            "JAX_COORDINATOR_ADDRESS",
            "JOB_INDEX",
            "JOB_COMPLETION_INDEX",
            "PROCESSES_IN_JOB",
            "JAX_PROCESS_COUNT",
        )
    } == {
        "JAX_COORDINATOR_ADDRESS": HOSTS[0],
        "JOB_INDEX": "0",
        "JOB_COMPLETION_INDEX": str(worker_id),
        "PROCESSES_IN_JOB": "2",
        "JAX_PROCESS_COUNT": "2",
    }


def test_one_host_runs_one_process_as_before():
    train = build(PipelineConfig(profile="tiny"), ONE_HOST)["train"]
    assert "skip_jax_distributed_system=true" in train.argv
    assert "JAX_COORDINATOR_ADDRESS" not in train.env
    assert build(PipelineConfig(), ONE_HOST)["train"].env["TPU_WORKER_HOSTNAMES"] == "localhost"


def test_a_slice_needs_as_many_workers_as_hosts():
    with pytest.raises(ValueError, match="v6e-16 has 4 host"):
        build(PipelineConfig(accelerator_type="v6e-16"), JaxProcess(0, HOSTS[:2]))


def test_export_verify_keep_and_eval_run_on_worker_0_only():
    assert pipeline.plan("tiny", "keep", leader=False) == ["assets", "convert", "train"]
    assert pipeline.plan("full", "export", leader=False) == ["convert", "train"]
    assert pipeline.plan("full", "eval", leader=False) == ["convert", "train"]
    assert pipeline.plan("full", "eval", leader=True) == list(pipeline.ORDER)


@pytest.mark.parametrize(
    ("worker_id", "hostnames", "problem"),
    [
        (None, "a,b", "one is given without the other"),
        (2, "a,b", "2 is not a worker of 2"),
        (0, "a,a", "lists a host twice"),
        (0, "a,-b", "'-b' is not a hostname"),
    ],
)
def test_bad_worker_flags_are_refused(worker_id, hostnames, problem):
    with pytest.raises(ConfigError, match=problem):
        JaxProcess.from_flags(worker_id, hostnames)


def test_no_flags_is_one_host():
    assert JaxProcess.from_flags(None, None) == ONE_HOST and not ONE_HOST.multi_host and ONE_HOST.leader


def test_every_worker_trains_with_the_compile_cache_beside_the_runs():
    """JAX writes its compilation cache from process 0 only, for the others to read: each host's own ~/jax_cache
    would leave every other worker compiling on a retry while worker 0 waits."""
    for worker_id in (0, 3):
        train = build(PipelineConfig(accelerator_type="v6e-16"), JaxProcess(worker_id, HOSTS))["train"]
        assert "jax_cache_dir=gs://b/runs/jax-cache" in train.argv
    one_vm = Layout("/dev/shm", "/out", "gemma3-4b", "run")  # no runs dir: MaxText's default, as in the seed
    assert not any(a.startswith("jax_cache_dir=") for a in commands.train_sft(PipelineConfig(), one_vm).argv)
    one_cpu = build(PipelineConfig(profile="tiny"), ONE_HOST)["train"]  # one process: its own entries
    assert "jax_cache_dir=gs://b/runs/jax-cache" in one_cpu.argv


@pytest.mark.parametrize("worker_id", [0, 1])
def test_the_cpu_stand_in_of_a_slice_trains_with_no_compile_cache(worker_id):
    """On CPU, process 1's cache keys never equal process 0's (workload/run/commands.py says why): with a cache, a
    resumed train loaded worker 0's step and compiled worker 1's, and gloo's 30 s ran out between them."""
    train = build(PipelineConfig(profile="tiny"), JaxProcess(worker_id, HOSTS[:2]))["train"]
    assert [a for a in train.argv if a.startswith("jax_cache_dir=")] == ["jax_cache_dir="]
