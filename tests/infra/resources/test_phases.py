"""The post-deploy tasks: one command per phase and the run task after bootstrap, chained, re-run exactly when their
inputs change."""

import json
import os
import socket

import pytest

from rehearsal.engine import is_secret, plain, run_program
from remote.pipeline.profile import VM
from tests.fixtures.mock_engine import OWN_INPUTS, recorded_inputs
from workload.core.config import SETTINGS, PipelineConfig
from workload.core.contract import PHASES, RUN_TASK

COMMAND = "command:local:Command"
INSTANCE = "gcp:compute/instance:Instance"


def phases(stack):
    by_name = {r.name.rsplit("-", 1)[1]: r for r in stack.of_type(COMMAND)}
    return {phase: by_name[phase] for phase in PHASES}


def run_task(stack):
    (task,) = [r for r in stack.of_type(COMMAND) if r.name == f"tpu-sft-dev-pipeline-{RUN_TASK}"]
    return task


def test_each_phase_runs_the_remote_cli(mock_stack):
    for phase, command in phases(mock_stack()).items():
        assert command.inputs["create"] == f".venv/bin/python -m remote phase {phase}"
        assert command.inputs["logging"] == "stdoutAndStderr"  # live progress in `pulumi up`
        assert command.inputs["addPreviousOutputInEnv"] is False  # no unbounded env var from the last run
        assert "dir" not in command.inputs  # runs in the project directory: relative paths, same state anywhere


def test_phases_are_chained_after_the_vm(mock_stack):
    stack = mock_stack()
    steps = phases(stack)
    vm = stack.one(INSTANCE)
    firewalls = {r.urn for r in stack.of_type("gcp:compute/firewall:Firewall")}
    assert vm.urn in steps["bootstrap"].dependencies or any("TpuVm" in d for d in steps["bootstrap"].dependencies)
    assert any("SshFirewall" in d or d in firewalls for d in steps["bootstrap"].dependencies)
    # Nothing trains before the checkpoint bucket and the VM's grant on it exist.
    assert stack.one("gcp:storage/bucket:Bucket").urn in steps["bootstrap"].dependencies
    for grant in stack.of_type("gcp:storage/bucketIAMMember:BucketIAMMember"):
        assert grant.urn in steps["bootstrap"].dependencies
    # Bootstrap, the run task, then the phases that follow the run.
    chain = [steps["bootstrap"], run_task(stack), *(steps[phase] for phase in PHASES[1:])]
    for before, after in zip(chain, chain[1:], strict=False):
        assert before.urn in after.dependencies


def test_the_run_task_starts_the_run_with_every_setting(mock_stack):
    stack = mock_stack()
    task, export = run_task(stack), phases(stack)["export"]
    assert task.inputs["create"] == ".venv/bin/python -m remote start-run"
    assert task.inputs["logging"] == "stdoutAndStderr" and task.inputs["addPreviousOutputInEnv"] is False
    env = task.inputs["environment"]
    assert env["TPU_SFT_TARGET"] == export.inputs["environment"]["TPU_SFT_TARGET"]
    settings = json.loads(env["TPU_SFT_PIPELINE"])
    assert settings == PipelineConfig.from_mapping(settings).to_mapping()  # every setting, the last phase's too
    assert task.inputs["triggers"] == ["tpu-sft-dev-id", settings]  # a new VM, or any setting: the run again
    assert not any(is_secret(v) for v in env.values())


def test_environment_names_the_target_and_pipeline(mock_stack, dev_config):
    for phase, command in phases(mock_stack()).items():
        env = command.inputs["environment"]
        assert set(env) == {"TPU_SFT_TARGET", "TPU_SFT_PIPELINE"}
        target = json.loads(env["TPU_SFT_TARGET"])
        assert target == {
            "host": "tpu-sft-dev",
            "user": "tpu-sft",
            "key_path": "~/.ssh/google_compute_engine",  # a path, never the key
            "known_hosts": ".tpu-sft/known_hosts/dev-tpu-sft-dev-id",  # pinned per VM instance id
            "task_logs": ".tpu-sft/logs/dev-tpu-sft-dev-id",  # each task's whole log, beside it
            "gateway": "gcloud compute start-iap-tunnel %h %p --listen-on-stdin --zone=us-east5-b "
            "--project=my-tpu-project --verbosity=warning",
            "trust_on_first_use": True,
            # the seed's install, /dev/shm scratch, kept on the mounted data disk and copied to the bucket,
            # checkpoints in the bucket
            "profile": {
                **VM.to_mapping(),
                "kept_copy_dir": "gs://my-tpu-project-tpu-sft-dev-runs/kept",
                "runs_dir": "gs://my-tpu-project-tpu-sft-dev-runs/runs",
            },
        }
        settings = json.loads(env["TPU_SFT_PIPELINE"])
        pipeline = PipelineConfig.from_mapping(settings)
        assert pipeline.phase_settings(phase) == settings  # only what this phase depends on
        assert OWN_INPUTS[phase] <= set(settings)
        assert pipeline.model == "gemma3-4b"
        if phase in ("train", "export", "eval"):  # the phases the batch feeds: the seed's tokens at the stack's batch 4
            assert pipeline.steps == 250
        assert not any(is_secret(v) for v in env.values())  # a secret here would make every output secret


def test_no_secret_in_any_phase(mock_stack):
    token = "hf_" + "Zyx987" * 6
    stack = mock_stack({"tpu-sft:hfToken": token}, secret_keys=("tpu-sft:hfToken",))
    for command in [*phases(stack).values(), run_task(stack)]:
        assert token not in json.dumps(command.inputs)
    assert token not in json.dumps([plain(r.inputs) for r in stack.resources])
    (uploader,) = [r for r in stack.of_type(COMMAND) if r.name.endswith("-hf-token")]
    assert uploader.inputs["create"] == ".venv/bin/python -m remote put-secret hf_token"
    assert uploader.urn in phases(stack)["bootstrap"].dependencies  # the token is on the VM before convert


def test_triggers_are_vm_identity_and_phase_inputs(mock_stack):
    for phase, command in phases(mock_stack()).items():
        instance_id, inputs = command.inputs["triggers"]
        assert instance_id == "tpu-sft-dev-id"  # a replaced VM has a new id: every phase re-runs
        assert OWN_INPUTS[phase] <= set(inputs)


def test_every_pipeline_setting_feeds_a_phase():
    assert all(setting.phase in PHASES for setting in SETTINGS)


def _triggers(mock_stack, overrides):
    return {phase: c.inputs["triggers"] for phase, c in phases(mock_stack(overrides)).items()}


@pytest.mark.parametrize(
    ("change", "rerun"),
    [
        ({"tpu-sft:steps": "2000"}, {"train", "export", "eval"}),
        ({"tpu-sft:perDeviceBatchSize": "2"}, {"train", "export", "eval"}),
        ({"tpu-sft:learningRate": "1e-4"}, {"train", "export", "eval"}),
        # bootstrap too: it downloads the new model's weights (only that step re-runs there)
        ({"tpu-sft:model": "gemma3-12b"}, {"bootstrap", "convert", "train", "export", "eval"}),
        ({"tpu-sft:maxtextVersion": "0.2.2"}, {"bootstrap", "convert", "train", "export", "eval"}),
        ({"tpu-sft:instanceName": "tpu-sft-other"}, {"bootstrap", "convert", "train", "export", "eval"}),
        # the benchmarks: their own phase alone, never a retraining (docs/eval.md)
        ({"tpu-sft:evalTasks": '["gsm8k"]'}, {"eval"}),
        ({"tpu-sft:evalLimit": "50"}, {"eval"}),
        ({"tpu-sft:labels": '{"owner": "someone-else"}'}, set()),
        ({"tpu-sft:pricePerChipHour": "3.1"}, set()),
    ],
)
def test_change_table(mock_stack, change, rerun):
    before, after = _triggers(mock_stack, {}), _triggers(mock_stack, change)
    assert {phase for phase in PHASES if before[phase] != after[phase]} == rerun


def test_unchanged_config_declares_identical_commands(mock_stack):
    """Pulumi re-runs a command only when its inputs differ: same config, no phase runs, no SSH at all."""
    first, second = phases(mock_stack()), phases(mock_stack())
    for phase in PHASES:
        assert first[phase].inputs == second[phase].inputs


def test_preview_connects_to_nothing_but_what_it_checks_before_billing(mock_stack, monkeypatch):
    """No host, no SSH: only Compute Engine, asked for the reservation's mode (infra/config/google_checks.py; here
    the mock engine's stand-in), which this refusal makes unreadable, so the preview says so and goes on."""
    attempts, asked = [], []

    def refuse(sock, address):
        compute = os.environ.get("TPU_SFT_COMPUTE_API", "")
        (asked if compute.endswith(f"{address[0]}:{address[1]}") else attempts).append(address)
        raise OSError("no network in a preview")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    stack = mock_stack()
    assert phases(stack)  # the whole program ran
    assert attempts == [] and len(asked) == 1


def test_phase_summaries_become_stack_outputs(dev_config, monkeypatch):
    monkeypatch.setenv(
        "HF_TOKEN", "hf_" + "Tok3n" * 8
    )  # an update needs one (tests/infra/config/test_settings_errors.py)
    train = {"event": "summary", "ok": True, "final_step": 1000, "chip_hours": 1.37}
    bill = {"vm_up_s": 4932, "chips": 8, "chip_hours": 10.96, "usd_per_chip_hour": 2.7, "cost_usd": 29.59}
    export = {
        **train,
        "final_loss": 1.23,
        "eval_loss_first": 1.91,
        "eval_loss_final": 1.52,
        "learned": True,
        "trained_checkpoint": "/dev/shm/ckpt/1000/model_params",
        "kept_dir": "/mnt/tpu-sft-data/tpu-sft/run",
        "verify": {"ok": True},
        "bill": bill,
    }
    stdout = {
        "train": "train step 1000/1000 · loss 1.2300\n" + json.dumps(train) + "\n",
        "export": "✓ keep done in 3 s\n" + json.dumps(export) + "\n",
    }
    outputs = run_program(dev_config, preview=False, command_stdout=stdout).outputs
    assert outputs["finalStep"] == 1000
    assert outputs["finalLoss"] == 1.23
    assert outputs["evalLoss"] == {"first": 1.91, "final": 1.52, "learned": True}
    assert outputs["trainedCheckpoint"] == "/dev/shm/ckpt/1000/model_params"
    assert outputs["modelDir"] == "/mnt/tpu-sft-data/tpu-sft/run"
    assert outputs["verify"] == {"ok": True}
    # The bill is the VM's (its chips × its time since boot, measured at the end of the export job), not the
    # training's 1.37; the cost is at the stack's price.
    assert outputs["chipHoursUsed"] == 10.96
    assert outputs["costUsd"] == round(10.96 * 2.70, 2)


def test_a_run_without_held_out_passes_exports_no_eval_loss(dev_config, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_" + "Tok3n" * 8)
    export = {"event": "summary", "ok": True, "final_step": 1000, "final_loss": 1.23}
    outputs = run_program(dev_config, preview=False, command_stdout={"export": json.dumps(export) + "\n"}).outputs
    assert outputs.get("evalLoss") is None  # the engine drops a null output


def test_the_phases_keep_the_model_where_the_vm_mounts_the_data_disk():
    from infra.resources.disk import mount_script

    assert VM.required_mount is not None and VM.kept_dir.startswith(VM.required_mount + "/")
    assert f"mountpoint -q {VM.required_mount} || mount" in mount_script()


# One valid change of every pipeline setting, and of settings that reach the VM, rename it or change nothing.
# (Other VM-replacing keys such as bootDiskSizeGb change the instance id only in a real engine, not the mock's.)
KEY_CHANGES = [
    ("tpu-sft:maxtextVersion", "0.2.2"),
    ("tpu-sft:installPostTrainExtras", "true"),
    ("tpu-sft:torchBackend", "auto"),
    ("tpu-sft:model", "gemma3-12b"),
    ("tpu-sft:profile", "tiny"),
    ("tpu-sft:tokens", "32768000"),
    ("tpu-sft:steps", "2000"),
    ("tpu-sft:trainer", "tunix"),
    ("tpu-sft:perDeviceBatchSize", "2"),
    ("tpu-sft:tuning", "lora"),
    ("tpu-sft:loraRank", "8"),
    ("tpu-sft:loraAlpha", "16"),
    ("tpu-sft:loraModules", '["q_proj"]'),
    ("tpu-sft:loraWeightQtype", "int8"),
    ("tpu-sft:rematPolicy", "minimal"),
    ("tpu-sft:attention", "dot_product"),
    ("tpu-sft:flashBlockSize", "1024"),
    ("tpu-sft:vocabTiling", "4"),
    ("tpu-sft:weightDtype", "bfloat16"),
    ("tpu-sft:xlaFlags", "--xla_tpu_enable_async_collective_fusion=true"),
    ("tpu-sft:dataset", "someone/chats"),
    ("tpu-sft:trainSplit", "train_gen"),
    ("tpu-sft:trainDataColumns", '["prompt"]'),
    ("tpu-sft:chatTemplate", "gs://team-data/chat.jinja"),
    ("tpu-sft:learningRate", "1e-4"),
    ("tpu-sft:maxTargetLength", "1024"),
    ("tpu-sft:acceleratorType", "v6e-4"),
    ("tpu-sft:checkpointPeriod", "50"),
    ("tpu-sft:evalInterval", "125"),
    ("tpu-sft:evalSteps", "4"),
    ("tpu-sft:evalSplit", "test_gen"),
    ("tpu-sft:evalData", "gs://team-data/other-held-out.jsonl"),
    ("tpu-sft:requireLearning", "true"),
    ("tpu-sft:runName", "my-run"),
    ("tpu-sft:evalTasks", '["gsm8k"]'),
    ("tpu-sft:evalLimit", "50"),
    ("tpu-sft:instanceName", "tpu-sft-other"),
    ("tpu-sft:access", "direct"),
    ("tpu-sft:sshUser", "someone"),
    ("tpu-sft:labels", '{"owner": "someone-else"}'),
    ("tpu-sft:pricePerChipHour", "3.1"),
    ("tpu-sft:dataDiskSizeGb", "200"),
    ("tpu-sft:keepDataDisk", "true"),
]


# Held-out files need a file dataset: the change is made beside one, set before and after.
# LoRA is Tunix's loop's, and an adapter's shape a LoRA run's.
_LORA = {"tpu-sft:trainer": "tunix", "tpu-sft:tuning": "lora"}
CHANGED_BESIDE = {
    "tpu-sft:evalData": {
        "tpu-sft:dataset": "gs://team-data/chats.jsonl",
        "tpu-sft:evalData": "gs://team-data/held-out.jsonl",
    },
    "tpu-sft:tuning": {"tpu-sft:trainer": "tunix"},
    **dict.fromkeys(("tpu-sft:loraRank", "tpu-sft:loraAlpha", "tpu-sft:loraModules"), _LORA),
    "tpu-sft:loraWeightQtype": {**_LORA, "tpu-sft:tuning": "qlora"},
}


@pytest.mark.parametrize(("key", "value"), KEY_CHANGES, ids=[k for k, _ in KEY_CHANGES])
def test_phases_whose_inputs_change_are_the_plans_answer(mock_stack, dev_config, key, value):
    from infra.config.read_settings import parse
    from infra.plan.reruns import plan

    assert dev_config.get(key) != value
    from infra.plan.reruns import vm_identity

    beside = CHANGED_BESIDE.get(key, {})
    tasks = (*PHASES, RUN_TASK)
    before = recorded_inputs(mock_stack(beside), tasks)
    after = recorded_inputs(mock_stack({**beside, key: value}), tasks)
    recorded = {phase for phase in PHASES if before[phase] != after[phase]}
    settings = [parse({**dev_config, **beside, **change}, stack="dev") for change in ({}, {key: value})]
    planned = {phase for phase, reruns, _ in plan(*settings) if reruns}
    if vm_identity(settings[0]) != vm_identity(settings[1]):
        # A replaced VM: a real engine gives it a new instance id, which every phase's triggers hold; the mock's
        # ids are the resource's name (tests/infra/resources/test_vm.py checks what replaces it).
        recorded = set(PHASES)
    assert recorded == planned
    # The run task's inputs are every setting: it runs again whenever a phase does, and only then.
    assert (before[RUN_TASK] != after[RUN_TASK]) == any(before[phase] != after[phase] for phase in PHASES)


def test_every_pipeline_setting_is_in_the_change_table():
    # epochs reach the phases as the tokens they come to (tests/infra/config/test_data_size.py)
    changed = {key.split(":", 1)[1] for key, _ in KEY_CHANGES}
    assert set(PipelineConfig().to_mapping()) - {"epochs"} <= changed


def test_a_changed_steps_shows_in_the_preview_as_the_run_tasks_input(mock_stack):
    """What `pulumi preview` diffs: the recorded inputs. A new `steps` is the run task's, train's and export's new
    input, never convert's (its part of the run is done with its own settings)."""
    tasks = (*PHASES, RUN_TASK)
    before = recorded_inputs(mock_stack(), tasks)
    after = recorded_inputs(mock_stack({"tpu-sft:steps": "2000"}), tasks)
    changed = {task for task in before if before[task] != after[task]}
    assert changed == {RUN_TASK, "train", "export", "eval"}
    settings = [json.loads(inputs[RUN_TASK]["environment"]["TPU_SFT_PIPELINE"]) for inputs in (before, after)]
    assert (settings[0]["steps"], settings[1]["steps"]) == (None, 2000)  # the seed's length, then the one set
    assert after[RUN_TASK]["triggers"][1] == settings[1]


@pytest.mark.parametrize("preview", [True, False], ids=["preview", "update"])
def test_evaluating_the_program_writes_no_file(dev_config, monkeypatch, tmp_path, preview):
    """The settings travel as the tasks' inputs, which Pulumi tracks: the program, run where `pulumi` runs it (the
    project directory, here an empty one), leaves it as it was, whether it previews or updates."""
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 30)  # an update of the full profile needs one
    stack = run_program({**dev_config, "tpu-sft:steps": "1234"}, preview=preview, cwd=tmp_path)
    assert json.loads(run_task(stack).inputs["environment"]["TPU_SFT_PIPELINE"])["steps"] == 1234  # it ran whole
    assert list(tmp_path.iterdir()) == []
