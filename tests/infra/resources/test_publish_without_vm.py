"""A `pulumi up` that only adds a publish destination after autostop deleted the VM of a finished run: the program
declares no VM, no group and no phase, changes nothing else the state holds, and publishes from the bucket on the
machine that runs `pulumi up` (infra/resources/bucket_publish.py). The state it starts from is what the earlier
`pulumi up` left (the mock engine's readStackResourceOutputs answers it, each command with what it printed)."""

import json
import logging
import sys

import pytest

from infra.resources import bucket_publish
from infra.resources.bucket_publish import PUBLISH_HERE
from rehearsal.engine import plain, run_program
from remote.pipeline.target import PipelineTarget
from workload.core.contract import PHASES, PIPELINE_ENV

COMMAND = "command:local:Command"
INSTANCE = "gcp:compute/instance:Instance"
GROUP = "gcp:compute/instanceGroupManager:InstanceGroupManager"
RUN = "gemma3-4b-sft-0123456789ab"
BUCKET = "my-tpu-project-tpu-sft-dev-runs"
KEPT_BYTES = 7_760_000_000
WRITE_TOKEN = "hf_" + "NoVmCanary" * 4


def summary(ok: bool = True, **extra) -> str:
    """The last phase's summary line, as a finished run's eval task printed it last."""
    fields = {"event": "summary", "ok": ok, "until": "eval", "run_name": RUN, "kept_bytes": KEPT_BYTES}
    return "eval: done\n" + json.dumps(fields | {"kept_dir": f"/mnt/tpu-sft-data/tpu-sft/{RUN}"} | extra) + "\n"


@pytest.fixture
def up(dev_config, monkeypatch, tmp_path_factory):
    """The program run as `pulumi up` runs it after an earlier one that left `state` (None: a new stack)."""
    monkeypatch.setenv("HF_TOKEN", "hf_" + "Read" * 8)  # `up` places the read token: from $HF_TOKEN here
    monkeypatch.setenv("HF_WRITE_TOKEN", "hf_" + "Write" * 8)
    # The preview asks only that a Python to publish with exists (never runs it here). A contributor's checkout has no
    # .maxtext-venv (issue 74): the program sees one without venvs, and the Python named is this one.
    monkeypatch.setattr(bucket_publish, "ROOT", tmp_path_factory.mktemp("checkout-without-venvs"))
    monkeypatch.setenv("TPU_SFT_PUBLISH_PYTHON", sys.executable)

    def run(overrides=None, *, state=None, eval_stdout=None, remove=(), **kwargs):
        eval_stdout = summary() if eval_stdout is None else eval_stdout
        config = {k: v for k, v in {**dev_config, **(overrides or {})}.items() if k not in remove}
        return run_program(config, preview=False, state=state, command_stdout={PHASES[-1]: eval_stdout}, **kwargs)

    return run


def names(stack, type_):
    return [r.name for r in stack.of_type(type_)]


def test_a_finished_run_without_its_vm_publishes_from_the_bucket_and_declares_no_vm(up, caplog):
    caplog.set_level(logging.INFO)
    finished = up()  # the run's `pulumi up`: the VM, the phases, the eval's summary in the state
    stack = up({"tpu-sft:publishHubRepo": "team/gemma-sft"}, state=finished)
    assert names(stack, INSTANCE) == [] and names(stack, GROUP) == []
    [task] = stack.of_type(COMMAND)[-1:]
    assert [c.name for c in stack.of_type(COMMAND) if "-pipeline-" in c.name] == ["tpu-sft-dev-pipeline-publish"]
    model = f"gs://{BUCKET}/kept/{RUN}"
    assert task.inputs["create"] == (
        f"{PUBLISH_HERE} --model {model} --hub team/gemma-sft --eval-gate block --eval-margin 2"
    )
    assert json.loads(task.inputs["triggers"][0]) == json.loads(
        next(c for c in finished.of_type(COMMAND) if c.name.endswith(PHASES[-1])).inputs["environment"][PIPELINE_ENV]
    )
    assert stack.outputs["modelDir"] == model
    # What scripts/tpu-sft reads: the VM by its name (Compute Engine says it is gone), the bucket's kept copy and log.
    target = PipelineTarget.from_json(stack.outputs["target"])
    assert (target.host, stack.outputs["instanceName"]) == ("tpu-sft-dev", "tpu-sft-dev")
    assert (target.profile.kept_copy_dir, target.profile.runs_dir) == (f"gs://{BUCKET}/kept", f"gs://{BUCKET}/runs")
    assert stack.outputs["phases"] == {"run": f"run {RUN} finished before: no VM, published from {model}"}
    [said] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("no VM:")]
    assert said == (
        f"no VM: run {RUN} finished with these settings and Compute Engine has no VM of the stack now, so this update "
        f"makes none and publishes {model} to hf://team/gemma-sft from this machine; estimate: 7.8 GB through this "
        "machine, in and out: ~21 min at 100 Mbit/s"
    )


def test_what_stays_declared_is_unchanged(up):
    """Every resource of the no-VM update is declared as the run's update declared it (no diff: the data disk, the
    firewall, the bucket and its grants for the VM's account), but the publish task; what goes is the VM, its
    autostop grant and the phases' tasks."""
    finished = up({"tpu-sft:publishHubRepo": "team/gemma-sft"})
    stack = up({"tpu-sft:publishHubRepo": "team/gemma-sft"}, state=finished)
    before = {(r.type, r.name): plain(r.inputs) for r in finished.resources}
    after = {(r.type, r.name): plain(r.inputs) for r in stack.resources if r.name != "tpu-sft-dev-pipeline-publish"}
    assert {key: before.get(key) for key in after} == after
    gone = sorted(name for _, name in set(before) - set(after) - {(COMMAND, "tpu-sft-dev-pipeline-publish")})
    assert "tpu-sft-dev-data" not in gone and "tpu-sft-dev" in gone
    assert all(
        name.startswith(("tpu-sft-dev-pipeline", "tpu-sft-dev-autostop")) or name == "tpu-sft-dev" for name in gone
    )


def test_the_write_token_is_on_the_tasks_stdin_only(up):
    finished = up()
    stack = up(
        {"tpu-sft:publishHubRepo": "team/gemma-sft", "tpu-sft:hfWriteToken": WRITE_TOKEN},
        state=finished,
        secret_keys=("tpu-sft:hfWriteToken",),
    )
    [task] = [c for c in stack.of_type(COMMAND) if c.name == "tpu-sft-dev-pipeline-publish"]
    assert task.inputs["create"].endswith(" --token-stdin") and task.inputs["stdin"]["value"] == WRITE_TOKEN
    for r in stack.resources:
        assert WRITE_TOKEN not in json.dumps(plain(r.inputs))
    assert WRITE_TOKEN not in json.dumps(plain(stack.outputs))


def test_a_second_publish_only_update_still_needs_no_vm(up):
    """The state now holds the bucket's publish task, not the phases: it says the run finished, with these settings."""
    finished = up()
    first = up({"tpu-sft:publishHubRepo": "team/gemma-sft"}, state=finished)
    again = up({"tpu-sft:publishHubRepo": "team/gemma-sft", "tpu-sft:publishHubPublic": "true"}, state=first)
    assert names(again, INSTANCE) == []
    [task] = [c for c in again.of_type(COMMAND) if c.name == "tpu-sft-dev-pipeline-publish"]
    assert " --public " in task.inputs["create"]


@pytest.mark.parametrize(
    ("why", "change"),
    [
        ("the VM is there: it publishes", {"statuses": {"tpu-sft-dev": "RUNNING"}}),
        ("a setting changed: the run must train", {"overrides": {"tpu-sft:learningRate": "0.0002"}}),
        ("the eval failed", {"eval_stdout": summary(ok=False, error="lm-eval exited 1")}),
        ("no destination", {"overrides": {"tpu-sft:publishHubRepo": ""}}),
    ],
)
def test_otherwise_the_vm_and_the_phases_are_declared(up, why, change):
    finished = up(eval_stdout=change.pop("eval_stdout", summary()))
    overrides = {"tpu-sft:publishHubRepo": "team/gemma-sft", **change.pop("overrides", {})}
    stack = up({k: v for k, v in overrides.items() if v}, state=finished, **change)
    assert names(stack, INSTANCE) == ["tpu-sft-dev"], why
    assert {f"tpu-sft-dev-pipeline-{phase}" for phase in PHASES} <= set(names(stack, COMMAND)), why


def test_no_python_to_publish_with_stops_the_preview_in_one_line(up, monkeypatch, tmp_path):
    finished = up()
    monkeypatch.setenv("TPU_SFT_PUBLISH_PYTHON", str(tmp_path / "none"))
    with pytest.raises(Exception) as refused:
        up({"tpu-sft:publishHubRepo": "team/gemma-sft"}, state=finished)
    assert (
        str(refused.value)
        .splitlines()[-1]
        .endswith(
            f"publishing from the bucket with no VM: no Python to publish with at {tmp_path / 'none'}: run "
            "scripts/maxtext-venv, or set $TPU_SFT_PUBLISH_PYTHON to a Python that has huggingface_hub, "
            "google-cloud-storage and gcsfs"
        )
    )


def test_a_destination_bucket_names_the_grant_this_machine_needs(up, caplog):
    caplog.set_level(logging.INFO)
    finished = up()
    up({"tpu-sft:publishGcsUri": "gs://models/team/gemma"}, state=finished)
    [said] = [r.getMessage() for r in caplog.records if r.getMessage().startswith("no VM:")]
    assert said.endswith(
        "; Cloud Storage is written with this machine's credentials, which need roles/storage.objectUser on "
        'gs://models: gcloud storage buckets add-iam-policy-binding gs://models --member="user:$(gcloud config '
        'get-value account)" --role=roles/storage.objectUser'
    )


def test_a_group_of_one_whose_vm_is_gone_drops_the_group_and_keeps_its_disk(up):
    recovering = {"tpu-sft:provisioningModel": "SPOT", "tpu-sft:recovery": "auto"}
    finished = up(recovering, remove=("tpu-sft:reservation",), instance_ids={"tpu-sft-dev-01": "7000000001"})
    stack = up(
        {**recovering, "tpu-sft:publishHubRepo": "team/gemma-sft"},
        state=finished,
        remove=("tpu-sft:reservation",),
        instance_ids={"tpu-sft-dev-01": None},  # autostop resized the group to 0
    )
    assert names(stack, GROUP) == [] and names(stack, INSTANCE) == []
    assert "tpu-sft-dev-data" in names(stack, "gcp:compute/disk:Disk")
    assert [c.name for c in stack.of_type(COMMAND) if "-pipeline-" in c.name] == ["tpu-sft-dev-pipeline-publish"]


def test_a_slice_whose_hosts_are_gone_publishes_its_kept_model_where_it_kept_it(up):
    """A slice keeps to the bucket: the model URL is its kept dir. Its group, template and policy go (empty since
    autostop resized it to 0; a later `pulumi up` that trains makes them again); its firewalls and grants stay."""
    slice_keys = {"tpu-sft:acceleratorType": "v6e-16"}
    kept = f"gs://{BUCKET}/kept/{RUN}"
    disk_keys = ("tpu-sft:dataDiskSizeGb", "tpu-sft:dataDiskType")
    finished = up(slice_keys, remove=disk_keys, eval_stdout=summary(kept_dir=kept))
    assert names(finished, GROUP) == ["tpu-sft-dev"]
    stack = up(
        {**slice_keys, "tpu-sft:publishGcsUri": f"gs://{BUCKET}/published/m"},
        state=finished,
        remove=disk_keys,
        instance_ids={"tpu-sft-dev-01": None},
    )
    assert names(stack, GROUP) == [] and names(stack, INSTANCE) == []
    [task] = [c for c in stack.of_type(COMMAND) if "-pipeline-" in c.name]
    assert task.inputs["create"].startswith(f"{PUBLISH_HERE} --model {kept} --gcs gs://{BUCKET}/published/m ")
    target = PipelineTarget.from_json(stack.outputs["target"])
    assert (
        target.hosts == tuple(f"tpu-sft-dev-0{n}" for n in range(1, 5))
        and target.profile.kept_dir == f"gs://{BUCKET}/kept"
    )
    # The autostop role's ID suffix is drawn anew by each mock run (the engine keeps the state's): left out here.
    redrawn = ("gcp:projects/iAMCustomRole:IAMCustomRole", "gcp:projects/iAMMember:IAMMember")
    before = {(r.type, r.name): plain(r.inputs) for r in finished.resources}
    after = [r for r in stack.resources if r.name != task.name and r.type not in redrawn]
    assert after and all(before.get((r.type, r.name)) == plain(r.inputs) for r in after)
