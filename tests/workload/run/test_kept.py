"""A kept model is reused only for exactly the inputs a job knows, and only while it matches its manifest."""

import json

from workload.run import kept
from workload.run.fingerprint import manifest

MADE_FROM = {"convert": "c1", "train": "t1"}


def keep(tmp_path, name="run", inputs=MADE_FROM):
    kept_dir = tmp_path / "out" / name
    (kept_dir / "hf-model").mkdir(parents=True)
    (kept_dir / "hf-model" / "model.safetensors").write_bytes(b"weights")
    (kept_dir / "loss.png").write_bytes(b"png")
    files = manifest(str(kept_dir), hashes=True)
    steps = {
        step: {"inputs": fingerprint, "facts": {"final_step": 3} if step == "train" else {}}
        for step, fingerprint in inputs.items()
    }
    (kept_dir / kept.MANIFEST).write_text(json.dumps({"run_name": name, "steps": steps, "files": files}))
    return kept_dir


def test_the_same_inputs_and_intact_files_are_reused(tmp_path):
    found, why = kept.verified(str(keep(tmp_path)), MADE_FROM)
    assert why == "" and kept.facts(found, ["convert", "train"]) == {"final_step": 3}
    assert kept.facts(found, ["convert"]) == {}  # only what the asked steps reported


def test_other_inputs_for_any_asked_step_are_not_reused(tmp_path):
    kept_dir = str(keep(tmp_path))
    other = (None, "the kept model was made from other inputs")
    assert kept.verified(kept_dir, {"convert": "c1", "train": "t2"}) == other
    assert kept.verified(kept_dir, {"convert": "c1", "export": "e1"}) == other  # a step it does not record
    assert kept.verified(kept_dir, {"convert": "c1"})[1] == ""  # a convert job knows convert's inputs only


def test_a_changed_file_of_the_same_size_is_not_reused(tmp_path):
    kept_dir = keep(tmp_path)
    (kept_dir / "hf-model" / "model.safetensors").write_bytes(b"WEIGHTS")
    found, why = kept.verified(str(kept_dir), MADE_FROM)
    assert found is None
    assert why == "the kept model differs from its manifest (hf-model/model.safetensors: sha256 differs)"
    assert kept.find(str(kept_dir), MADE_FROM) is None


def test_a_missing_file_or_manifest_is_not_reused(tmp_path):
    kept_dir = keep(tmp_path)
    (kept_dir / "loss.png").unlink()
    assert kept.verified(str(kept_dir), MADE_FROM)[1] == "the kept model differs from its manifest (loss.png: missing)"
    assert kept.verified(str(tmp_path / "nothing"), MADE_FROM) == (None, "no kept model")


def test_find_looks_in_this_runs_dir_first_then_beside_it(tmp_path):
    mine, other = keep(tmp_path, "mine"), keep(tmp_path, "a-other", {"convert": "c1", "train": "t2"})
    assert kept.find(str(mine), {"convert": "c1"}) == (str(mine), kept.read(str(mine)))
    # A convert job does not know the run's name: a kept model with its convert inputs is found beside it.
    assert kept.find(str(tmp_path / "out" / "unknown"), {"convert": "c1"})[0] == str(other)
    assert kept.find(str(tmp_path / "out" / "unknown"), {"convert": "c1", "train": "t1"})[0] == str(mine)
    assert kept.find(str(mine), {"convert": "c2"}) is None


def test_the_reason_names_the_first_difference_in_manifest_order(tmp_path):
    kept_dir = keep(tmp_path)
    (kept_dir / "hf-model" / "model.safetensors").write_bytes(b"WEIGHTS")
    (kept_dir / "loss.png").unlink()
    # The manifest lists a directory's own files before its subdirectories' (os.walk).
    assert kept.verified(str(kept_dir), MADE_FROM)[1] == "the kept model differs from its manifest (loss.png: missing)"
