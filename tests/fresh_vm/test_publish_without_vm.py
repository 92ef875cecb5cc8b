"""After the finished run, autostop empties the VM's group (its VM deleted); the user adds tpu-sft:publishHubRepo and
runs `pulumi up`. The program, reading the state the earlier `up` left (each command with what it printed), declares
no VM and no phase, and its one command publishes the kept model from the checkpoint bucket on this machine
(infra/resources/bucket_publish.py), through the same `python -m workload.publish` the VM's task runs, to the Hub
stand-in: no VM boots, and what arrives is the kept model's bytes."""

from __future__ import annotations

import hashlib
import json

from tests.fresh_vm.conftest import HUB_REPO, WRITE_TOKEN

# The rehearsal's VM is a Spot VM in its group of one: neither the group nor its template, nor a plain VM.
HOSTS = ("gcp:compute/instance:Instance", "gcp:compute/instanceGroupManager:InstanceGroupManager")


def test_no_vm_is_declared_or_booted(fresh_vm):
    run = fresh_vm.run
    assert run.publish_declared, "the publish-only `pulumi up` declared nothing: its step did not run"
    assert not set(HOSTS) & set(run.publish_declared)
    assert not any("instanceTemplate" in t for t in run.publish_declared)
    assert "gcp:compute/disk:Disk" in run.publish_declared  # the data disk stays, as declared before
    assert len(run.boots) == run.boots_before_publish  # nothing booted after autostop's delete
    assert [c.name for c in run.publish_up] == ["tpu-sft-rehearsal-pipeline-publish"]  # no phase, no bootstrap


def test_the_kept_model_is_published_from_the_bucket_with_its_own_bytes(fresh_vm):
    run = fresh_vm.run
    [done] = run.publish_up
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    bucket_copy = f"/kept/{run.kept_manifest['run_name']}"
    assert lines[0].startswith("publish: gs://") and f"{bucket_copy} → from this machine, no VM: " in lines[0]
    assert f"✓ published to hf://{HUB_REPO}: " in done.stdout
    assert json.loads(lines[-1])["ok"]
    # What arrived is the kept model: the published manifest is the kept one (the export's weights and config under
    # the text-only model's names, what keep recorded of them under `text_only`), and every file sent matches it.
    published = json.loads(fresh_vm.hub.content(HUB_REPO, "tpu-sft/manifest.json"))
    assert published["run_name"] == run.kept_manifest["run_name"]
    assert published["text_only"]["kept"]["hf-model/model.safetensors"]["sha256"] == next(
        e["sha256"] for e in run.kept_manifest["files"] if e["path"] == "hf-model/model.safetensors"
    )
    weights = next(e for e in published["files"] if e["path"] == "hf-model/model.safetensors")
    assert hashlib.sha256(fresh_vm.hub.content(HUB_REPO, "model.safetensors")).hexdigest() == weights["sha256"]
    assert WRITE_TOKEN not in done.stdout + done.stderr
