"""A kept model is reused only for exactly this run's inputs and only while it matches its manifest."""

import json

from workload import kept
from workload.fingerprint import manifest


def keep(tmp_path, identity="run-a"):
    kept_dir = tmp_path / "out" / "run"
    (kept_dir / "hf-model").mkdir(parents=True)
    (kept_dir / "hf-model" / "model.safetensors").write_bytes(b"weights")
    (kept_dir / "loss.png").write_bytes(b"png")
    files = manifest(str(kept_dir), hashes=True)
    record = {"identity": identity, "facts": {"final_step": 3}, "files": files}
    (kept_dir / kept.MANIFEST).write_text(json.dumps(record))
    return kept_dir


def test_the_same_inputs_and_intact_files_are_reused(tmp_path):
    found, why = kept.verified(str(keep(tmp_path)), "run-a")
    assert why == "" and found["facts"] == {"final_step": 3}


def test_other_inputs_are_not_reused(tmp_path):
    assert kept.verified(str(keep(tmp_path)), "run-b") == (None, "the kept model was made from other inputs")


def test_a_changed_file_of_the_same_size_is_not_reused(tmp_path):
    kept_dir = keep(tmp_path)
    (kept_dir / "hf-model" / "model.safetensors").write_bytes(b"WEIGHTS")
    found, why = kept.verified(str(kept_dir), "run-a")
    assert found is None
    assert why == "the kept model differs from its manifest (hf-model/model.safetensors: sha256 differs)"


def test_a_missing_file_or_manifest_is_not_reused(tmp_path):
    kept_dir = keep(tmp_path)
    (kept_dir / "loss.png").unlink()
    assert kept.verified(str(kept_dir), "run-a")[1] == "the kept model differs from its manifest (loss.png: missing)"
    assert kept.verified(str(tmp_path / "nothing"), "run-a") == (None, "no kept model")
