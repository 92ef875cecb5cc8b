"""One storage interface for a run's outputs, local or gs://: the same calls give the same answers on a
directory and on a real Cloud Storage API (gcp-storage-emulator), through gcsfs in the MaxText venv."""

import json
import subprocess

import pytest

from tests.workload.tiny_run import REPO
from workload.core.trainer_loop import TRAINER_LOOPS
from workload.run import storage, train_metrics
from workload.run.layout import Layout

EXERCISE = r"""
import json, os, sys, tempfile
from workload.run import storage as s
root = sys.argv[1]
s.write_text(s.join(root, "run", "checkpoints", "10", "commit_success.txt"), "done")
s.write_text(s.join(root, "run", "checkpoints", "20", "model_params", "a"), "0123456789")
s.write_text(s.join(root, "run", "tensorboard", "events.out.tfevents.1"), "has SECRET in it")
local = tempfile.mkdtemp()
s.download(s.join(root, "run", "checkpoints"), local)
print(json.dumps({
    "dirs": s.list_dirs(s.join(root, "run", "checkpoints")),
    "missing_dirs": s.list_dirs(s.join(root, "nothing")),
    "read": s.read_text(s.join(root, "run", "checkpoints", "10", "commit_success.txt")),
    "read_missing": s.read_text(s.join(root, "run", "nope")),
    "files": s.files(s.join(root, "run")),
    "is_dir": [s.is_dir(s.join(root, "run", "checkpoints", "20")), s.is_dir(s.join(root, "run", "nope"))],
    "downloaded": sorted(os.path.relpath(os.path.join(d, f), local) for d, _, fs in os.walk(local) for f in fs),
    "rewritten": len(s.rewrite_files(s.join(root, "run"), "events.out", lambda b: b.replace(b"SECRET", b"******"))),
    "after": s.read_text(s.join(root, "run", "tensorboard", "events.out.tfevents.1")),
    **keep_and_find(root),
}))
"""
# What a slice's keep step does with the bucket (workload/run/steps.py keep): upload a kept model, manifest last, over
# an older one; then find it by its inputs, and refuse it once a file's size changed.
KEEP_AND_FIND = r"""
from workload.run import fingerprint, kept
def keep_and_find(root):
    src = tempfile.mkdtemp()
    os.makedirs(os.path.join(src, "hf-model"))
    with open(os.path.join(src, "hf-model", "w"), "w") as f:
        f.write("weights")
    files = fingerprint.manifest(src, hashes=True)
    with open(os.path.join(src, kept.MANIFEST), "w") as f:
        json.dump({"run_name": "run", "steps": {"train": {"inputs": "t1", "facts": {}}}, "files": files}, f)
    s.write_text(s.join(root, "kept", "run", "stale-from-an-older-model"), "old")
    s.upload_tree(src, s.join(root, "kept", "run"), last=kept.MANIFEST)
    found = kept.find(s.join(root, "kept", "not-this-run"), {"train": "t1"})
    s.write_text(s.join(root, "kept", "run", "hf-model", "w"), "WEIGHTS, longer")
    return {"kept_files": s.files(s.join(root, "kept", "run")), "found": found and os.path.basename(found[0]),
            "found_other_inputs": kept.find(s.join(root, "kept", "run"), {"train": "t2"}),
            "after_change": kept.verified(s.join(root, "kept", "run"), {"train": "t1"})[1]}
"""


def exercise(python: str, root: str) -> dict:
    done = subprocess.run(
        [python, "-c", KEEP_AND_FIND + EXERCISE, root],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_a_directory_and_a_bucket_answer_alike(maxtext_python, gcs, tmp_path):
    on_disk = exercise(maxtext_python, str(tmp_path / "runs"))
    in_bucket = exercise(maxtext_python, gcs.gs("storage-test"))
    assert on_disk == in_bucket
    assert on_disk["dirs"] == ["10", "20"] and on_disk["missing_dirs"] == []
    assert on_disk["read"] == "done" and on_disk["read_missing"] is None
    assert on_disk["files"]["checkpoints/20/model_params/a"] == 10
    assert on_disk["is_dir"] == [True, False]
    assert on_disk["downloaded"] == ["10/commit_success.txt", "20/model_params/a"]
    assert on_disk["rewritten"] == 1 and on_disk["after"] == "has ****** in it"
    assert set(on_disk["kept_files"]) == {"hf-model/w", "manifest.json"}  # the older model's file is gone
    assert on_disk["found"] == "run" and on_disk["found_other_inputs"] is None
    assert on_disk["after_change"] == "the kept model differs from its manifest (hf-model/w: size 15 != 7)"
    assert gcs.objects("storage-test/run/checkpoints/20/") == {"storage-test/run/checkpoints/20/model_params/a": 10}


def test_step_records_persist_and_come_back_on_a_host_without_them(tmp_path):
    old_vm = Layout(str(tmp_path / "vm1"), str(tmp_path / "out"), "gemma3-4b", "run", runs_dir=str(tmp_path / "runs"))
    new_vm = Layout(str(tmp_path / "vm2"), str(tmp_path / "out"), "gemma3-4b", "run", runs_dir=str(tmp_path / "runs"))
    assert train_metrics.restore(new_vm) is False  # nothing persisted yet
    (tmp_path / "vm1" / "train-metrics" / "run").mkdir(parents=True)
    with open(old_vm.metrics_file, "w") as f:
        f.write('{"step": 1, "loss": 12.5}\n{"step": 2, "loss": 12.4}\n')
    with open(old_vm.attempts_file, "w") as f:
        f.write('{"attempt": 100.0}\n')
    train_metrics.persist(old_vm)
    assert storage.read_text(storage.join(old_vm.persisted_metrics_dir, "train_steps.jsonl")).count("\n") == 2
    assert train_metrics.restore(new_vm) is True
    with open(new_vm.metrics_file) as f:
        assert [json.loads(line)["step"] for line in f] == [1, 2]
    assert train_metrics.restore(new_vm) is False  # a host with its own records keeps them


@pytest.mark.parametrize(
    "url, expected",
    [
        ("gs://b/runs", "gs://b/runs/gemma3-4b/post-train/r/checkpoints/7/model_params"),
        ("/mnt/disk/runs", "/mnt/disk/runs/gemma3-4b/post-train/r/checkpoints/7/model_params"),
    ],
)
def test_maxtext_is_given_the_runs_url_as_is(url, expected):
    layout = Layout("/dev/shm/w", "/out", "gemma3-4b", "r", runs_dir=url)
    assert layout.trained_params(TRAINER_LOOPS["tunix"], 7) == expected


def test_records_are_copied_around_each_checkpoint_and_every_30_s():
    cadence = train_metrics.Cadence(checkpoint_period=10, every_s=3600)
    assert [step for step in range(1, 31) if cadence.due(step)] == [9, 10, 19, 20, 29, 30]
    assert train_metrics.Cadence(checkpoint_period=None, every_s=0).due(7) is True
    assert train_metrics.Cadence(checkpoint_period=None, every_s=3600).due(7) is False
