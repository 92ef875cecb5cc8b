"""rehearsal/bucket_objects.py: the objects the program declares (a local dataset's copies) written into the
emulator's bucket with the bytes of their assets, as pulumi-gcp's create would, and nowhere else."""

from __future__ import annotations

from pathlib import Path

import pytest

from infra.config.local_data import resolve
from rehearsal import gcs_emulator
from rehearsal.bucket_objects import NotUploadable, upload_declared
from rehearsal.storage_iam import DeclaredStorage
from tests.fixtures.datasets import good_rows, write_jsonl
from workload.core.config import PipelineConfig


def in_bucket(stack, bucket: str, tmp: Path) -> dict[str, bytes]:
    """What the bucket holds under data/ once the stack's objects are written, by object name."""
    emulator = gcs_emulator.start(bucket, tmp / "emulator.log")
    try:
        upload_declared(stack, emulator)
        emulator.download("data", tmp / "back")
    finally:
        emulator.stop()
    return {f"data/{p.relative_to(tmp / 'back').as_posix()}": p.read_bytes() for p in (tmp / "back").rglob("*.jsonl")}


def test_file_assets_are_written_with_the_files_bytes(mock_stack, tmp_path):
    chats = write_jsonl(tmp_path / "chats.jsonl", good_rows(20))
    held_out = write_jsonl(tmp_path / "held-out-file.jsonl", good_rows(3))
    stack = mock_stack({"tpu-sft:dataset": str(chats), "tpu-sft:evalData": str(held_out)})
    written = in_bucket(stack, DeclaredStorage.of(stack).bucket, tmp_path)
    assert {name.rsplit("/", 1)[1]: data for name, data in written.items()} == {
        "chats.jsonl": chats.read_bytes(),
        "held-out-file.jsonl": held_out.read_bytes(),
    }


def test_string_assets_are_written_with_their_text(mock_stack, tmp_path):
    """A held-out share: the two parts `pulumi up` cuts are the objects' text, not files on disk."""
    chats = write_jsonl(tmp_path / "chats.jsonl", good_rows(20))
    stack = mock_stack({"tpu-sft:dataset": str(chats), "tpu-sft:evalData": "10%"})
    local = resolve(PipelineConfig.from_mapping({"dataset": str(chats), "evalData": "10%"}), "any")
    assert in_bucket(stack, DeclaredStorage.of(stack).bucket, tmp_path) == {
        u.object_name: (u.content or "").encode() for u in local.uploads
    }


def test_an_object_declared_in_another_bucket_is_refused_and_nothing_written(mock_stack, tmp_path):
    chats = write_jsonl(tmp_path / "chats.jsonl", good_rows(20))
    stack = mock_stack({"tpu-sft:dataset": str(chats), "tpu-sft:evalData": "10%"})
    emulator = gcs_emulator.start("another-bucket", tmp_path / "emulator.log")
    try:
        with pytest.raises(NotUploadable, match="is declared in bucket .* not another-bucket"):
            upload_declared(stack, emulator)
        assert emulator.objects() == {}
    finally:
        emulator.stop()
