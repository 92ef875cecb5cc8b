"""The test helpers over gcp-storage-emulator: what `upload` puts under a prefix, `download` brings back."""

from __future__ import annotations

from rehearsal import gcs_emulator


def test_a_folder_uploaded_under_a_prefix_downloads_as_the_same_files(tmp_path):
    source = tmp_path / "source"
    (source / "nested").mkdir(parents=True)
    (source / "jit__train_step-ab12-cache").write_bytes(bytes(range(256)) * 4)
    (source / "nested" / "b").write_bytes(b"b")
    emulator = gcs_emulator.start("models", tmp_path / "emulator.log")
    try:
        emulator.upload(source, "runs/jax-cache")
        assert emulator.objects("runs/") == {
            "runs/jax-cache/jit__train_step-ab12-cache": 1024,
            "runs/jax-cache/nested/b": 1,
        }
        emulator.download("runs/jax-cache", tmp_path / "back")
    finally:
        emulator.stop()
    files = {p.relative_to(tmp_path / "back"): p.read_bytes() for p in (tmp_path / "back").rglob("*") if p.is_file()}
    assert files == {p.relative_to(source): p.read_bytes() for p in source.rglob("*") if p.is_file()}
