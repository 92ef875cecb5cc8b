"""The VM reads its dataset from Cloud Storage with its own identity and only what the program granted it: the
IAM-enforcing stand-in (rehearsal/storage_iam.py) in front of gcp-storage-emulator, the grants the program declared
under the mock engine, and the read MaxText's HF pipeline makes (`datasets.load_dataset("json", data_files=gs://…,
streaming=True)`, through gcsfs) in the MaxText venv, as the VM's service account. No training: the argv that
hands MaxText these URLs is test_file_datasets.py's, a training on files tests/workload/test_local_jsonl_train.py's."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from infra.config.local_data import resolve
from rehearsal import storage_iam
from tests.fixtures.datasets import good_rows, write_jsonl
from tests.fixtures.home import _home  # noqa: F401 (autouse: the program reads the stack's key pair there)
from tests.workload.tiny_run import REPO
from workload.core.config import PipelineConfig

READ = (
    "import sys; from workload.preflight.data import load_rows; print(len(load_rows(sys.argv[1], 'train', None, None)))"
)


def read_as_the_vm(python: str, declared: storage_iam.DeclaredStorage, bucket: str, files: Path, url: str, tmp: Path):
    """Serve `files` in `bucket` (`files/a/b` as the object `a/b`) and read `url` through the stand-in as the
    declared VM identity."""
    iam = storage_iam.StorageIam(storage_iam.gcs_emulator.start(bucket, tmp / "emulator.log"), declared.grants)
    try:
        for folder in files.iterdir():
            iam.emulator.upload(folder, folder.name)
        return subprocess.run(
            [python, "-c", READ, url],
            cwd=REPO,
            env={**os.environ, **iam.env(declared.host), "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"},
            capture_output=True,
            text=True,
            timeout=300,
            stdin=subprocess.DEVNULL,
        )
    finally:
        iam.stop()


@pytest.fixture
def team_files(tmp_path) -> Path:
    files = tmp_path / "files"
    (files / "sft").mkdir(parents=True)
    write_jsonl(files / "sft" / "chats.jsonl", good_rows(40))
    return files


def test_the_declared_read_only_grant_lets_the_vm_read_another_bucket(maxtext_python, mock_stack, team_files, tmp_path):
    stack = mock_stack({"tpu-sft:dataset": "gs://team-data/chats.jsonl", "tpu-sft:evalData": "gs://team-data/h.jsonl"})
    declared = storage_iam.DeclaredStorage.of(stack)
    done = read_as_the_vm(maxtext_python, declared, "team-data", team_files, "gs://team-data/sft/chats.jsonl", tmp_path)
    assert (done.returncode, done.stdout.split()[-1:]) == (0, ["40"]), done.stderr[-2000:]


def test_without_the_grant_the_vm_is_refused(maxtext_python, mock_stack, team_files, tmp_path):
    declared = storage_iam.DeclaredStorage.of(mock_stack())  # a Hub dataset: nothing granted on team-data
    done = read_as_the_vm(maxtext_python, declared, "team-data", team_files, "gs://team-data/sft/chats.jsonl", tmp_path)
    account = declared.host.removeprefix("serviceAccount:")
    assert done.returncode != 0
    assert f"{account} does not have storage.objects." in done.stderr, done.stderr[-2000:]


def test_a_local_files_copy_in_the_stacks_bucket_is_read_with_the_vms_own_grant(
    maxtext_python, mock_stack, team_files, tmp_path
):
    """What `pulumi up` uploads (infra/config/local_data.py's objects) is what the VM reads, at the URL the phases
    get."""
    settings = {"tpu-sft:dataset": str(team_files / "sft" / "chats.jsonl"), "tpu-sft:evalData": "10%"}
    declared = storage_iam.DeclaredStorage.of(mock_stack(settings))
    local = resolve(PipelineConfig.from_mapping({"dataset": settings["tpu-sft:dataset"], "evalData": "10%"}), "b")
    copies = tmp_path / "copies"
    for upload in local.uploads:
        (copies / upload.object_name).parent.mkdir(parents=True, exist_ok=True)
        (copies / upload.object_name).write_text(upload.content or "")
    url = local.pipeline.dataset.replace("gs://b/", f"gs://{declared.bucket}/")
    done = read_as_the_vm(maxtext_python, declared, declared.bucket, copies, url, tmp_path)
    assert (done.returncode, done.stdout.split()[-1:]) == (0, ["36"]), done.stderr[-2000:]  # 40 less the 10 % held out


@pytest.fixture(autouse=True)
def _no_ambient_storage(monkeypatch):
    """Each test brings its own stand-in: none of the session's variables may leak into the child."""
    for name in storage_iam.gcs_emulator.client_env(""):
        monkeypatch.delenv(name, raising=False)
