"""keepDataDisk in the order a user follows it: set it, `pulumi up`, `pulumi destroy`.

`pulumi destroy` does not run the program: it deletes what the state lists, reading each resource's
retainOnDelete from the state that the last `pulumi up` recorded. So the setting has to go through an update
first, and that update must be cheap: it flips the flag on the data disk and the bucket and re-runs nothing.
"""

import json

import pytest

from infra.plan import load, plan
from rehearsal.engine import ROOT

DISK = "gcp:compute/disk:Disk"
BUCKET = "gcp:storage/bucket:Bucket"
COMMAND = "command:local:Command"


def test_keep_then_up_records_the_retain_flag_for_destroy(mock_stack):
    before = mock_stack()
    assert (before.one(DISK).retain_on_delete, before.one(BUCKET).retain_on_delete) == (False, False)
    after = mock_stack({"tpu-sft:keepDataDisk": "true"})  # what `pulumi up` registers, and the state then holds
    assert (after.one(DISK).retain_on_delete, after.one(BUCKET).retain_on_delete) == (True, True)
    # Only the flag changes: the disk and bucket inputs are the same, so the update modifies nothing in Google.
    assert after.one(DISK).inputs == before.one(DISK).inputs
    assert after.one(BUCKET).inputs == before.one(BUCKET).inputs


def test_force_destroy_then_up_records_it_for_destroy(mock_stack):
    assert mock_stack().one(BUCKET).inputs["forceDestroy"] is False
    assert mock_stack({"tpu-sft:bucketForceDestroy": "true"}).one(BUCKET).inputs["forceDestroy"] is True


@pytest.mark.parametrize("key", ["tpu-sft:keepDataDisk", "tpu-sft:bucketForceDestroy"])
def test_that_up_reruns_no_phase(mock_stack, key):
    before = {c.name: c.inputs for c in mock_stack().of_type(COMMAND)}
    after = {c.name: c.inputs for c in mock_stack({key: "true"}).of_type(COMMAND)}
    assert before == after  # pulumi-command re-runs a command only when an input changes


@pytest.mark.parametrize("key", ["tpu-sft:keepDataDisk", "tpu-sft:bucketForceDestroy"])
def test_the_pull_request_plan_agrees(tmp_path, key):
    dev = (ROOT / "Pulumi.dev.yaml").read_text()
    assert f'{key}: "false"' in dev
    head = tmp_path / "head.yaml"
    head.write_text(dev.replace(f'{key}: "false"', f'{key}: "true"'))
    rows = plan(load(ROOT / "Pulumi.dev.yaml", "dev"), load(head, "dev"))
    assert [rerun for _, rerun, _ in rows] == [False] * len(rows), json.dumps(rows)
