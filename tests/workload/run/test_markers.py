"""Fingerprints, manifests and done-markers."""

import os

from workload.core.export_fix import RIGHT, fix_hidden_activation
from workload.run import markers
from workload.run.fingerprint import fingerprint, manifest, manifest_mismatches


def test_fingerprint_ignores_key_order_and_sees_every_value():
    assert fingerprint({"a": 1, "b": [1, 2]}) == fingerprint({"b": [1, 2], "a": 1})
    assert fingerprint({"a": 1}) != fingerprint({"a": 2})
    assert fingerprint({"a": (1, 2)}) == fingerprint({"a": [1, 2]})


def write(path, data):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data)


def test_manifest_lists_files_with_sizes_and_checksums(tmp_path):
    write(tmp_path / "a" / "x.bin", b"hello")
    write(tmp_path / "b.txt", b"")
    entries = manifest(str(tmp_path), hashes=True)
    assert [(e["path"], e["size"]) for e in entries] == [("b.txt", 0), ("a/x.bin", 5)]
    x = next(e for e in entries if e["path"] == "a/x.bin")
    assert x["sha256"] == "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    write(tmp_path / "a" / "x.bin", b"HELLO")
    assert manifest_mismatches(str(tmp_path), entries) == ["a/x.bin: sha256 differs"]


def test_marker_is_done_only_with_same_fingerprint_and_outputs(tmp_path):
    work = tmp_path / "work"
    write(work / "out" / "ckpt.bin", b"12345")
    path = str(work / "markers" / "convert.json")
    assert markers.why_not_done(markers.read(path), "fp1", str(work)) == "not done yet"
    markers.write(
        path,
        step="convert",
        fingerprint="fp1",
        outputs=str(work / "out"),
        base=str(work),
        facts={"checkpoint": "x"},
        hashes=False,
    )
    assert markers.read(path)["outputs"] == "out"  # relative: the work dir can move
    assert markers.why_not_done(markers.read(path), "fp1", str(work)) is None
    assert markers.why_not_done(markers.read(path), "fp2", str(work)) == "its inputs changed"
    write(work / "out" / "ckpt.bin", b"123")
    assert "ckpt.bin: size 3 != 5" in markers.why_not_done(markers.read(path), "fp1", str(work))
    os.remove(work / "out" / "ckpt.bin")
    assert "missing" in markers.why_not_done(markers.read(path), "fp1", str(work))


def test_a_moved_work_dir_keeps_its_markers_valid(tmp_path):
    write(tmp_path / "a" / "out" / "f", b"x")
    markers.write(
        str(tmp_path / "a" / "m.json"),
        step="s",
        fingerprint="f",
        outputs=str(tmp_path / "a" / "out"),
        base=str(tmp_path / "a"),
        facts={},
        hashes=True,
    )
    os.rename(tmp_path / "a", tmp_path / "b")
    assert markers.why_not_done(markers.read(str(tmp_path / "b" / "m.json")), "f", str(tmp_path / "b")) is None


def test_export_fix_corrects_hidden_activation_once_and_says_why(tmp_path):
    path = tmp_path / "config.json"
    path.write_text('{"model_type": "gemma3", "text_config": {"hidden_activation": "gelu", "hidden_size": 64}}')
    (change,) = fix_hidden_activation(str(path))
    assert change["key"] == "text_config.hidden_activation" and change["now"] == RIGHT
    assert "maxtext#2867" in change["why"]
    assert '"hidden_activation": "gelu_pytorch_tanh"' in path.read_text()
    assert fix_hidden_activation(str(path)) == []
