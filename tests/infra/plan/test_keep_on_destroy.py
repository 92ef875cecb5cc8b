"""What `pulumi destroy` does with each billable resource, read from what `pulumi up` records.

`pulumi destroy` does not run the program: it deletes what the state lists, with each resource's protect,
retainOnDelete and provider inputs (the bucket's forceDestroy, a disk's autoDelete) as the last `pulumi up`
recorded them. So the record of an update after a finished run is what a destroy acts on: by default every
billable resource must go, and only a keep setting may leave something. A keep setting changes only those flags,
so the update that records it re-runs nothing.
"""

import json

import pytest
from pulumi import RunError

from infra.plan.reruns import load, plan
from rehearsal.engine import ROOT, Stack, run_program
from tests.fixtures.mock_engine import DISK_KEYS

VM = "gcp:compute/instance:Instance"
DISK = "gcp:compute/disk:Disk"
BUCKET = "gcp:storage/bucket:Bucket"
GROUP = "gcp:compute/instanceGroupManager:InstanceGroupManager"
TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
COMMAND = "command:local:Command"
BILLABLE = {VM, DISK, BUCKET, GROUP, TEMPLATE}
SLICE = {"tpu-sft:acceleratorType": "v6e-16"}
EXPORT = {"event": "summary", "ok": True, "final_step": 1000, "kept_dir": "/mnt/tpu-sft-data/tpu-sft/run"}


def finished_run(config: dict[str, str]) -> Stack:
    """What a `pulumi up` that ran every phase to the end records in the state (the export phase's summary in)."""
    return run_program(config, preview=False, command_stdout={"export": json.dumps(EXPORT) + "\n"})


def left_by_destroy(stack: Stack) -> dict[str, str]:
    """Each billable resource `pulumi destroy` would not delete (by type), and why; the test for a deleted one is
    every flag and input that decides it."""
    left = {}
    for r in stack.resources:
        if r.type not in BILLABLE:
            continue
        assert r.protect is False, r.name  # a protected resource stops `pulumi destroy` with an error
        if r.retain_on_delete:
            left[r.type] = "retained"
            continue
        if r.type == BUCKET:
            assert r.inputs["forceDestroy"] is True  # else Cloud Storage refuses a bucket holding checkpoints
        if r.type == VM:
            assert r.inputs["bootDisk"]["autoDelete"] is True and not r.inputs.get("deletionProtection")
            # The data disk is attached without auto-delete: it goes as its own resource (DISK), or stays.
            assert [d.get("autoDelete", False) for d in r.inputs.get("attachedDisks", [])] == [False]
        if r.type == TEMPLATE:
            assert all(d["autoDelete"] for d in r.inputs["disks"])  # each host's boot disk goes with the host
    return left


@pytest.fixture
def up(dev_config, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_" + "Tok3n" * 8)  # an update needs one

    def run(overrides=None, *, slice_=False):
        config = {**dev_config, **(SLICE if slice_ else {}), **(overrides or {})}
        return finished_run({k: v for k, v in config.items() if not (slice_ and k in DISK_KEYS)})

    return run


@pytest.mark.parametrize(
    ("overrides", "left"),
    [
        pytest.param({}, {}, id="default"),
        pytest.param({"tpu-sft:keepDataDisk": "true"}, {DISK: "retained", BUCKET: "retained"}, id="keepDataDisk"),
        pytest.param({"tpu-sft:keepCheckpointBucket": "true"}, {BUCKET: "retained"}, id="keepCheckpointBucket"),
    ],
)
def test_destroy_after_a_run_leaves_only_what_a_setting_kept(up, overrides, left):
    stack = up(overrides)
    assert {r.type for r in stack.resources} >= {VM, DISK, BUCKET}
    assert left_by_destroy(stack) == left


@pytest.mark.parametrize(
    ("overrides", "left"),
    [
        pytest.param({}, {}, id="default"),
        # On a slice the kept model is in the bucket: keepDataDisk keeps it, as it always has.
        pytest.param({"tpu-sft:keepDataDisk": "true"}, {BUCKET: "retained"}, id="keepDataDisk"),
        pytest.param({"tpu-sft:keepCheckpointBucket": "true"}, {BUCKET: "retained"}, id="keepCheckpointBucket"),
    ],
)
def test_destroy_of_a_slice_after_a_run_leaves_only_what_a_setting_kept(up, overrides, left):
    stack = up(overrides, slice_=True)
    assert {r.type for r in stack.resources} >= {GROUP, TEMPLATE, BUCKET}
    assert left_by_destroy(stack) == left


@pytest.mark.parametrize("key", ["tpu-sft:keepDataDisk", "tpu-sft:keepCheckpointBucket"])
def test_a_keep_setting_changes_only_the_retain_flag_and_reruns_no_phase(mock_stack, key):
    before, after = mock_stack(), mock_stack({key: "true"})  # what `pulumi up` registers, and the state then holds
    for type_ in (DISK, BUCKET):  # same inputs: the update that records the flag changes nothing in Google
        assert after.one(type_).inputs == before.one(type_).inputs
    commands = [{c.name: c.inputs for c in stack.of_type(COMMAND)} for stack in (before, after)]
    assert commands[0] == commands[1]  # pulumi-command re-runs a command only when an input changes


@pytest.mark.parametrize("key", ["tpu-sft:keepDataDisk", "tpu-sft:keepCheckpointBucket"])
def test_the_pull_request_plan_agrees(tmp_path, key):
    dev = (ROOT / "Pulumi.dev.yaml").read_text()
    assert f'{key}: "false"' in dev
    head = tmp_path / "head.yaml"
    head.write_text(dev.replace(f'{key}: "false"', f'{key}: "true"'))
    rows = plan(load(ROOT / "Pulumi.dev.yaml", "dev"), load(head, "dev"))
    assert [rerun for _, rerun, _ in rows] == [False] * len(rows), json.dumps(rows)


@pytest.mark.parametrize("value", ["true", "false"])
def test_the_retired_bucket_force_destroy_is_refused_in_one_line_naming_the_fix(dev_config, value):
    declared = Stack()
    with pytest.raises(RunError) as raised:
        run_program({**dev_config, "tpu-sft:bucketForceDestroy": value}, into=declared)
    assert str(raised.value) == (
        "tpu-sft:bucketForceDestroy: is no longer a setting: `pulumi destroy` now empties and deletes the checkpoint "
        "bucket unless tpu-sft:keepCheckpointBucket or tpu-sft:keepDataDisk is true. Fix: pulumi config rm "
        "tpu-sft:bucketForceDestroy (and, to keep the bucket, pulumi config set tpu-sft:keepCheckpointBucket true)"
    )
    assert declared.resources == []  # before anything is created


STACK_BUCKET = "gs://my-tpu-project-tpu-sft-dev-runs"
KEPT = f"{STACK_BUCKET}/kept/"
BUCKET_LEFT = f"the checkpoint bucket {STACK_BUCKET} (the model in {KEPT})"
DELETED_WITH_THE_BUCKET = f"`pulumi destroy` deletes everything billable, the bucket with the model in {KEPT}"
KEEP_THE_BUCKET = (
    "fetch it (scripts/tpu-sft fetch-model, no VM needed), publish it (scripts/tpu-sft publish, or "
    "tpu-sft:publishHubRepo or tpu-sft:publishGcsUri and `pulumi up`: from the bucket, no VM needed once the run has "
    "finished), or keep the bucket (pulumi config set tpu-sft:keepCheckpointBucket true; after the last `pulumi up`: "
    "docs/checkpoints.md#keeping-the-data-disk-and-the-bucket)"
)
# A VM keeps its model on the data disk and copies it to the bucket (workload/run/kept.py `copy`): destroy takes both.
LOST_ON_DISK_AND_IN_BUCKET = (
    f"the fine-tuned model will be on the data disk and in {KEPT}, and `pulumi destroy` deletes the disk and empties "
    f"and deletes the bucket: {KEEP_THE_BUCKET}"
)
LOST_IN_BUCKET = (
    f"the fine-tuned model will be only in {KEPT}, and `pulumi destroy` empties and deletes that bucket: "
    f"{KEEP_THE_BUCKET}"
)
HUB = {"tpu-sft:publishHubRepo": "my-org/gemma3-4b-sft"}


@pytest.mark.parametrize(
    ("overrides", "slice_", "warned", "output"),
    [
        pytest.param({}, False, LOST_ON_DISK_AND_IN_BUCKET, LOST_ON_DISK_AND_IN_BUCKET, id="default"),
        pytest.param({}, True, LOST_IN_BUCKET, LOST_IN_BUCKET, id="slice"),
        pytest.param(
            {"tpu-sft:keepCheckpointBucket": "true"},
            False,
            None,
            f"`pulumi destroy` leaves {BUCKET_LEFT}, billable until you delete them; it deletes the rest",
            id="bucket-kept-with-the-vms-copy",
        ),
        pytest.param(
            {"tpu-sft:keepDataDisk": "true"},
            False,
            None,
            f"`pulumi destroy` leaves the data disk and {BUCKET_LEFT}, billable until you delete them; it deletes the "
            "rest",
            id="keepDataDisk",
        ),
        pytest.param(
            {"tpu-sft:keepCheckpointBucket": "true"},
            True,
            None,
            f"`pulumi destroy` leaves {BUCKET_LEFT}, billable until you delete them; it deletes the rest",
            id="slice-keepCheckpointBucket",
        ),
        pytest.param(
            HUB,
            False,
            None,
            f"{DELETED_WITH_THE_BUCKET}; the model is published to hf.co/my-org/gemma3-4b-sft",
            id="published-to-the-hub",
        ),
        pytest.param(
            {"tpu-sft:publishGcsUri": "gs://team-models/gemma"},
            True,
            None,
            f"{DELETED_WITH_THE_BUCKET}; the model is published to gs://team-models/gemma",
            id="published-to-another-bucket",
        ),
        pytest.param(
            {"tpu-sft:publishGcsUri": "gs://my-tpu-project-tpu-sft-dev-runs/published"},
            False,
            LOST_ON_DISK_AND_IN_BUCKET,
            LOST_ON_DISK_AND_IN_BUCKET,
            id="published-into-the-stacks-own-bucket",
        ),
    ],
)
def test_a_model_only_the_stack_holds_is_named_in_one_line_by_preview_and_by_the_output(
    dev_config, caplog, overrides, slice_, warned, output
):
    config = {**dev_config, **(SLICE if slice_ else {}), **overrides}
    outputs = run_program({k: v for k, v in config.items() if not (slice_ and k in DISK_KEYS)}).outputs  # a preview
    # The mock engine hands the program's warnings to Python's logging; the CLI prints them as `warning: …`. A stack
    # that publishes with no VM there also hears how to publish with none (tests/infra/resources/test_publish_task.py).
    warned_all = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    warnings = [w for w in warned_all if not w.startswith("no VM tpu-sft-dev now:")]
    assert warnings == ([warned] if warned else [])
    assert outputs["onDestroy"] == output
    assert "\n" not in output
