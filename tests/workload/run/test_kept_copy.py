"""A VM's keep step copies the model from its data disk to the checkpoint bucket (workload/run/kept.py `copy`), as
the VM's service account with the grants the program declares (the Cloud Storage IAM stand-in): every file the
manifest lists, checkable there by the manifest; without a grant to write, keep fails in one line naming the fix.
Through gcsfs, in the MaxText venv, as on the VM."""

import json
import os
import subprocess

from rehearsal import storage_iam
from rehearsal.storage_roles import PREDEFINED_ROLES
from tests.workload.tiny_run import REPO
from workload.run import kept
from workload.run.fingerprint import manifest

COPY = r"""
import json, sys
from workload.launch.proc import StepFailed
from workload.run import kept, storage
src, url = sys.argv[1], sys.argv[2]
try:
    kept.copy(src, url)
except StepFailed as failed:
    print(json.dumps({"failed": failed.cause}))
else:
    print(json.dumps({"files": storage.files(url), "found": kept.verified(url, {"train": "t1"})[1]}))
"""


def kept_on_disk(root) -> str:
    """A kept model as keep leaves it on the data disk: its files, then the manifest with their sha256."""
    model = root / "run-1"
    (model / "hf-model").mkdir(parents=True)
    (model / "hf-model" / "model.safetensors").write_bytes(os.urandom(70_000))
    (model / "loss.png").write_bytes(b"\x89PNG")
    files = manifest(str(model), hashes=True)
    steps = {"train": {"inputs": "t1", "facts": {}}}
    (model / kept.MANIFEST).write_text(json.dumps({"run_name": "run-1", "steps": steps, "files": files}))
    return str(model)


def copied(python: str, env: dict[str, str], src: str, url: str) -> dict:
    done = subprocess.run(
        [python, "-c", COPY, src, url],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **env, "PYTHONPATH": str(REPO)},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_the_vms_service_account_copies_the_kept_model_to_the_bucket(maxtext_python, gcs, tmp_path):
    src = kept_on_disk(tmp_path)
    gcs.put("kept/run-1/stale-from-an-older-model", b"old")
    got = copied(maxtext_python, {}, src, gcs.gs("kept", "run-1"))  # the fixture's env: the VM's identity
    manifest_size = os.path.getsize(f"{src}/{kept.MANIFEST}")
    assert got == {  # the older model's file is gone: the copy replaces what was there
        "files": {"hf-model/model.safetensors": 70_000, "loss.png": 4, kept.MANIFEST: manifest_size},
        "found": "",  # as a new VM (or slice) finds a kept model in the bucket: by its inputs and its files' sizes
    }
    gcs.download("kept/run-1", tmp_path / "back")
    for path in ("hf-model/model.safetensors", "loss.png", kept.MANIFEST):
        assert (tmp_path / "back" / path).read_bytes() == (tmp_path / "run-1" / path).read_bytes(), path


def test_without_the_grant_to_write_keep_fails_in_one_line_naming_the_fix(maxtext_python, declared_storage, tmp_path):
    viewer = {declared_storage.host: {declared_storage.bucket: PREDEFINED_ROLES["roles/storage.objectViewer"]}}
    iam = storage_iam.StorageIam(storage_iam.gcs_emulator.start(declared_storage.bucket, tmp_path / "log"), viewer)
    try:
        url = f"gs://{declared_storage.bucket}/kept/run-1"
        got = copied(maxtext_python, iam.env(declared_storage.host), kept_on_disk(tmp_path), url)
    finally:
        iam.stop()
    cause = got["failed"]
    assert cause.startswith(f"the model is kept in {tmp_path}/run-1, but its copy to {url} failed (")
    assert cause.endswith(
        "the VM's service account needs roles/storage.objectUser on the bucket: run `pulumi up` again"
    )
    assert "\n" not in cause and "(OSError: Forbidden: " in cause  # gcsfs's word for Google's 403
