"""Defect 1 of issue 22: a resume from the checkpoint bucket needs storage.buckets.get. orbax-checkpoint 0.11.39
opening a CheckpointManager on an existing directory calls `storage.Client().get_bucket()`
(CheckpointManager.__init__ → _load_checkpoint_infos → step.find_all → _glob_step_paths →
gcs_utils.is_hierarchical_namespace_enabled), which roles/storage.objectUser alone does not allow. Run in the
MaxText venv (orbax is there) against the Cloud Storage IAM stand-in, as the VM's service account."""

import os
import subprocess

import pytest

from rehearsal import storage_iam
from rehearsal.storage_roles import PREDEFINED_ROLES
from tests.workload.tiny_run import REPO

RESUME = REPO / "tests" / "workload" / "run" / "orbax_resume.py"
OBJECT_USER_ONLY = PREDEFINED_ROLES["roles/storage.objectUser"]  # the grant before the fix


def checkpoint_attempts(
    python: str, declared: storage_iam.DeclaredStorage, permissions: frozenset[str] | None, tmp_path
) -> list[subprocess.CompletedProcess]:
    """A first attempt saves step 1 into a new run directory; a second opens it again, as a resumed trainer does.
    `permissions`: the VM's grant on the bucket instead of the declared one."""
    grants = declared.grants if permissions is None else {declared.host: {declared.bucket: permissions}}
    iam = storage_iam.StorageIam(storage_iam.gcs_emulator.start(declared.bucket, tmp_path / "emulator.log"), grants)
    env = {**os.environ, **iam.env(declared.host), "EPATH_USE_TF": "false", "JAX_PLATFORMS": "cpu"}
    url = f"gs://{declared.bucket}/runs/run-1/checkpoints"
    try:
        return [
            subprocess.run(
                [python, str(RESUME), action, url],
                env=env,
                capture_output=True,
                text=True,
                timeout=300,
                stdin=subprocess.DEVNULL,
            )
            for action in ("save", "resume")
        ]
    finally:
        iam.stop()


def test_the_declared_grant_lets_a_trainer_resume_from_the_bucket(maxtext_python, declared_storage, tmp_path):
    first, resumed = checkpoint_attempts(maxtext_python, declared_storage, None, tmp_path)
    assert (first.returncode, first.stdout.split()[-1:]) == (0, ["1"]), first.stderr[-2000:]
    assert (resumed.returncode, resumed.stdout.split()[-1:]) == (0, ["1"]), resumed.stderr[-2000:]


def test_object_user_alone_fails_the_resume_with_a_403_naming_storage_buckets_get(
    maxtext_python, declared_storage, tmp_path
):
    first, resumed = checkpoint_attempts(maxtext_python, declared_storage, OBJECT_USER_ONLY, tmp_path)
    assert first.returncode == 0, first.stderr[-2000:]  # a new directory: orbax does not look the bucket up
    account = declared_storage.host.removeprefix("serviceAccount:")
    assert resumed.returncode != 0
    assert "google.api_core.exceptions.Forbidden: 403 GET" in resumed.stderr
    assert (
        f"{account} does not have storage.buckets.get access to the Google Cloud Storage bucket." in resumed.stderr
    ), resumed.stderr[-2000:]


@pytest.fixture(autouse=True)
def _no_ambient_storage(monkeypatch):
    """Each test brings its own stand-in: none of the session's variables may leak into the child."""
    for name in storage_iam.gcs_emulator.client_env(""):
        monkeypatch.delenv(name, raising=False)
