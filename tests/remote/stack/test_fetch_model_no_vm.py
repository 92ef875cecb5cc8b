"""`scripts/tpu-sft fetch-model` of a single VM's model once autostop has deleted the VM: the model comes from the VM's
copy in the checkpoint bucket (gs://<bucket>/kept/<run>/, workload/run/kept.py `copy`), read with the user's own access
through the Cloud Storage stand-in. No VM answers SSH, and no Google API but Cloud Storage is asked (every other one
needs gcloud's token, and the `gcloud` here records each call): nothing is made. Every file is checked against the
kept manifest; a partial file continues, a damaged one is refused."""

import json
from pathlib import Path

import pytest

from remote.ssh.errors import EXIT_VERIFY
from tests.remote.stack_commands import fetch_resuming_a_partial_file, kept_model, tpu_sft
from tests.ssh_testbed import free_port

DISK = "/mnt/tpu-sft-data/tpu-sft"  # where the VM kept the model: the `modelDir` output names it


@pytest.fixture
def vm_gone(recorded, tmp_path):
    """The VM stack's outputs, its VM deleted (nothing listens at its address), and a `gcloud` that records every
    call: a token for any Google API but the stand-in's Cloud Storage."""
    target = json.loads(recorded["target"]) | {
        "host": "127.0.0.1",
        "port": free_port("127.0.0.1"),
        "known_hosts": str(tmp_path / "known_hosts"),
        "connect_timeout": 3,
    }
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "gcloud").write_text(f'#!/bin/sh\necho "$@" >> {tmp_path / "gcloud-calls"}\necho ya29.standin\n')
    (bin_dir / "gcloud").chmod(0o755)
    return {**recorded, "target": json.dumps(target)}


def gcloud_calls(tmp_path: Path) -> str:
    calls = tmp_path / "gcloud-calls"
    return calls.read_text() if calls.exists() else ""


def test_the_vm_copies_its_model_to_the_checkpoint_buckets_kept_prefix(recorded, gcs):
    """What `pulumi up` tells the VM (its target's profile): the data disk, and the bucket's kept/ beside runs/."""
    profile = json.loads(recorded["target"])["profile"]
    assert profile["kept_dir"] == DISK and profile["kept_copy_dir"] == gcs.gs("kept")


def test_after_autostop_deleted_the_vm_the_model_comes_from_the_bucket_and_a_partial_file_continues(
    gcs, vm_gone, tmp_path
):
    model = kept_model(tmp_path / "src", "run-gone")
    gcs.upload(model, "kept/run-gone")  # as keep copied it (its manifest last)
    outputs = {**vm_gone, "modelDir": f"{DISK}/run-gone"}
    env = {"STORAGE_EMULATOR_HOST": gcs.url}
    fetch_resuming_a_partial_file(tmp_path, outputs, model, gcs.gs("kept/run-gone"), env)
    assert gcloud_calls(tmp_path) == ""  # no Compute Engine call, so no VM asked for, let alone made


def test_without_model_dir_the_latest_copy_in_the_bucket_is_fetched(gcs, vm_gone, tmp_path):
    """A stack whose last `pulumi up` did not see the keep step end (autostop came first): the copy whose manifest was
    written last."""
    prefix = f"kept-{tmp_path.name}"  # this test's own: the latest under it is the one uploaded last
    root = gcs.gs(prefix)
    target = json.loads(vm_gone["target"])
    target["profile"]["kept_copy_dir"] = root
    for run in ("run-old", "run-new"):
        gcs.upload(kept_model(tmp_path / "src", run, size=4096), f"{prefix}/{run}")
    outputs = {**vm_gone, "target": json.dumps(target)}
    result = tpu_sft(tmp_path, outputs, "fetch-model", str(tmp_path / "m"), env={"STORAGE_EMULATOR_HOST": gcs.url})
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"the model from {root}/run-new is in {tmp_path / 'm'}: 3 files match")
    assert gcloud_calls(tmp_path) == ""


def test_a_damaged_file_in_the_vms_copy_is_refused_and_not_kept(gcs, vm_gone, tmp_path):
    model = kept_model(tmp_path / "src", "run-damaged")
    gcs.upload(model, "kept/run-damaged")
    gcs.put("kept/run-damaged/hf-model/config.json", b'{"model_type": "tampered"}\n')  # after the manifest
    dest = tmp_path / "model"
    outputs = {**vm_gone, "modelDir": f"{DISK}/run-damaged"}
    result = tpu_sft(tmp_path, outputs, "fetch-model", str(dest), env={"STORAGE_EMULATOR_HOST": gcs.url})
    assert result.returncode == EXIT_VERIFY
    [line] = [line for line in result.stderr.splitlines() if line.startswith("error")]  # the others: progress
    assert line.startswith(f"error: {gcs.gs('kept/run-damaged/hf-model/config.json')} arrived as 27 bytes sha256 ")
    assert line.endswith("the copy in the bucket is damaged; nothing of it was kept")
    assert not (dest / "hf-model" / "config.json").exists() and not list(dest.rglob("*.partial"))
    assert not (dest / "manifest.json").exists()  # written last: this folder does not hold a model
