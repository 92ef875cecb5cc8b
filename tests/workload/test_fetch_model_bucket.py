"""`scripts/tpu-sft fetch-model` from the bucket, where a slice keeps its model (gs://<bucket>/kept/<run>/), read with
the user's own access through the Cloud Storage stand-in: the latest kept model, every file checked against its
manifest, a partial file continued; a file the manifest does not describe is refused and not kept."""

import json

import pytest

from remote.ssh.errors import EXIT_VERIFY
from tests.remote.stack_commands import kept_model, recorded_outputs, tpu_sft


@pytest.fixture(scope="module")
def slice_like(tmp_path_factory, gcs):
    """The rehearsal stack's outputs with its hosts keeping to the bucket, as a slice's do."""
    outputs = recorded_outputs(tmp_path_factory.mktemp("stack"))
    target = json.loads(outputs["target"])
    target["profile"]["kept_dir"] = gcs.gs("kept")
    return {**outputs, "target": json.dumps(target)}


def test_the_latest_kept_model_comes_from_the_bucket_and_a_partial_file_continues(gcs, slice_like, tmp_path):
    model = kept_model(tmp_path / "src", "run-a")
    gcs.upload(model, "kept/run-a")
    dest = tmp_path / "model"
    weights = (model / "hf-model" / "model.safetensors").read_bytes()
    (dest / "hf-model").mkdir(parents=True)
    (dest / "hf-model" / ".model.safetensors.partial").write_bytes(weights[:1000])  # a broken transfer's
    env = {"STORAGE_EMULATOR_HOST": gcs.url}  # the user's own view, the project's owner
    result = tpu_sft(tmp_path, slice_like, "fetch-model", str(dest), env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        f"the model from {gcs.gs('kept/run-a')} is in {dest}: 3 files match its manifest "
        "(3 fetched now, 1 of them resumed; the rest were here already)"
    )
    for path in ("hf-model/model.safetensors", "hf-model/config.json", "loss.png", "manifest.json"):
        assert (dest / path).read_bytes() == (model / path).read_bytes(), path
    assert not list(dest.rglob("*.partial"))
    again = tpu_sft(tmp_path, slice_like, "fetch-model", str(dest), env=env)
    assert "(0 fetched now, 0 of them resumed" in again.stdout


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
