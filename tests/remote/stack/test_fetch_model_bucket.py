"""`scripts/tpu-sft fetch-model` from the bucket, where a slice keeps its model (gs://<bucket>/kept/<run>/), read with
the user's own access through the Cloud Storage stand-in: the latest kept model, every file checked against its
manifest, a partial file continued; a file the manifest does not describe is refused and not kept."""

import json

import pytest

from remote.ssh.errors import EXIT_VERIFY
from tests.remote.stack_commands import fetch_resuming_a_partial_file, kept_model, tpu_sft
from workload.publish import layout


@pytest.fixture(scope="module")
def slice_like(recorded, gcs):
    """The rehearsal stack's outputs with its hosts keeping to the bucket, as a slice's do."""
    outputs = recorded
    target = json.loads(outputs["target"])
    target["profile"]["kept_dir"] = gcs.gs("kept")
    return {**outputs, "target": json.dumps(target)}


def test_the_latest_kept_model_comes_from_the_bucket_and_a_partial_file_continues(gcs, slice_like, tmp_path):
    model = kept_model(tmp_path / "src", "run-a")
    gcs.upload(model, "kept/run-a")
    env = {"STORAGE_EMULATOR_HOST": gcs.url}  # the user's own view, the project's owner
    fetch_resuming_a_partial_file(tmp_path, slice_like, model, gcs.gs("kept/run-a"), env)


def test_a_damaged_copy_in_the_bucket_is_refused(gcs, slice_like, tmp_path):
    model = kept_model(tmp_path / "src", "run-b")
    (model / "loss.png").write_bytes(b"\x89PNG not what the manifest hashed")
    gcs.upload(model, "kept/run-b")
    dest = tmp_path / "model"
    outputs = {**slice_like, "modelDir": gcs.gs("kept/run-b")}
    result = tpu_sft(tmp_path, outputs, "fetch-model", str(dest), env={"STORAGE_EMULATOR_HOST": gcs.url})
    assert result.returncode == EXIT_VERIFY
    [line] = [line for line in result.stderr.splitlines() if line.startswith("error")]  # the others: progress
    assert line.startswith(f"error: {gcs.gs('kept/run-b/loss.png')} arrived as 33 bytes sha256 ")
    assert line.endswith("the copy in the bucket is damaged; nothing of it was kept")
    assert not (dest / "loss.png").exists() and not list(dest.rglob("*.partial"))


def test_a_copy_published_to_cloud_storage_needs_no_vm(gcs, recorded, tmp_path):
    """A VM's stack that publishes to Cloud Storage (the `published` output names where), whose copy in the bucket is
    missing: the model comes from the published copy, laid out as a Hub repo (workload/publish/layout.py), into the
    kept layout here; the VM is never asked."""
    model = kept_model(tmp_path / "src", "run-c")
    repo = tmp_path / "repo"
    for entry in json.loads((model / "manifest.json").read_text())["files"]:
        (repo / layout.destination_path(entry["path"])).parent.mkdir(parents=True, exist_ok=True)
        (repo / layout.destination_path(entry["path"])).write_bytes((model / entry["path"]).read_bytes())
    (repo / layout.MANIFEST).write_bytes((model / "manifest.json").read_bytes())
    (repo / layout.CARD).write_text("# the model card\n")
    gcs.upload(repo, "published/sft")
    target = json.loads(recorded["target"])
    target["profile"]["kept_copy_dir"] = gcs.gs("kept-by-none")  # the VM's copy is not there (kept before it copied)
    published = {gcs.gs("published/sft"): {"unchanged": False, "skipped": 0}}
    outputs = {**recorded, "target": json.dumps(target), "published": published}
    dest = tmp_path / "model"
    result = tpu_sft(tmp_path, outputs, "fetch-model", str(dest), env={"STORAGE_EMULATOR_HOST": gcs.url})
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"the model from {gcs.gs('published/sft')} is in {dest}: 3 files match")
    for path in ("hf-model/model.safetensors", "hf-model/config.json", "loss.png", "manifest.json"):
        assert (dest / path).read_bytes() == (model / path).read_bytes(), path


def test_a_manifest_that_is_not_one_is_refused_in_one_line(gcs, slice_like, tmp_path):
    (tmp_path / "src").mkdir()
    (tmp_path / "src" / "manifest.json").write_text("<html>not a manifest</html>")
    gcs.upload(tmp_path / "src", "kept/run-d")
    outputs = {**slice_like, "modelDir": gcs.gs("kept/run-d")}
    result = tpu_sft(tmp_path, outputs, "fetch-model", str(tmp_path / "m"), env={"STORAGE_EMULATOR_HOST": gcs.url})
    assert result.returncode == EXIT_VERIFY
    assert result.stderr == f"error: {gcs.gs('kept/run-d/manifest.json')} is not JSON: not a kept model's manifest\n"
