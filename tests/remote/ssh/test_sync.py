"""push_tree ships a package and skips what is already there; fetch verifies what it brings back."""

import hashlib
import os

import pytest

from remote.ssh.connection import connect
from remote.ssh.errors import BadInput, FetchError, RemoteFileMissing, Unreachable
from remote.ssh.sync import fetch, push_tree
from tests.fixtures.sshd import relayed


@pytest.fixture
def package(tmp_path):
    root = tmp_path / "workload"
    (root / "sub dir").mkdir(parents=True)
    (root / "__init__.py").write_text("")
    (root / "run.sh").write_text("#!/bin/sh\necho hi\n")
    (root / "run.sh").chmod(0o755)
    (root / "sub dir" / "it's.py").write_text("X = 1\n")
    (root / "two  spaces.txt").write_text("sha256sum separates with two spaces too\n")
    (root / "__pycache__").mkdir()
    (root / "__pycache__" / "x.pyc").write_bytes(b"\0")
    return root


def test_push_tree_uploads_then_skips_in_one_round_trip(target, scratch, package, channels):
    remote_dir = scratch / "code 'dir'; $(touch canary)"  # the remote path is quoted on every command line
    with connect(target) as conn:
        first = push_tree(conn, package, str(remote_dir))
        assert first.uploaded == ("__init__.py", "run.sh", "sub dir/it's.py", "two  spaces.txt")
        assert first.unchanged == 0
        assert (remote_dir / "sub dir" / "it's.py").read_text() == "X = 1\n"
        assert (remote_dir / "run.sh").stat().st_mode & 0o777 == 0o755
        assert not (remote_dir / "__pycache__").exists()
        channels.clear()
        again = push_tree(conn, package, str(remote_dir))
        assert (again.uploaded, again.unchanged, channels) == ((), 4, {target.host: 1})
        (package / "__init__.py").write_text("VERSION = 2\n")
        changed = push_tree(conn, package, str(remote_dir))
    assert changed.uploaded == ("__init__.py",)
    assert (remote_dir / "__init__.py").read_text() == "VERSION = 2\n"
    assert not list(scratch.rglob("canary"))


def test_fetch_verifies_and_skips_what_matches(target, scratch, tmp_path):
    (scratch / "out dir").mkdir()
    artifact = scratch / "out dir" / "model.bin"
    artifact.write_bytes(bytes(range(256)) * 1000)
    local = tmp_path / "local"
    with connect(target) as conn:
        [got] = fetch(conn, [str(artifact)], local)
        assert got.transferred and got.size == 256000
        assert got.sha256 == hashlib.sha256(artifact.read_bytes()).hexdigest()
        assert (local / "model.bin").read_bytes() == artifact.read_bytes()
        [again] = fetch(conn, [str(artifact)], local)
        assert not again.transferred
        manifest = scratch / "out dir" / "manifest.json"
        manifest.write_text("{}")
        nested = tmp_path / "kept" / "run-1"  # made as needed
        fetch(conn, [str(artifact)], nested)
        kept, fetched = fetch(conn, [str(artifact), str(manifest)], nested)  # one matches, the next is still fetched
        assert (kept.transferred, fetched.transferred) == (False, True)
        assert (nested / "manifest.json").read_text() == "{}"
        with pytest.raises(RemoteFileMissing):
            fetch(conn, [str(scratch / "nope")], local)


def test_fetch_refuses_a_file_that_changes_in_flight(target, scratch, tmp_path, monkeypatch):
    artifact = scratch / "growing.log"
    artifact.write_text("before\n")
    with connect(target) as conn:
        sftp = conn.sftp()
        real_open = sftp.open

        def open_after_a_write(remote, mode):
            artifact.write_text("before\nafter\n")  # the file grows between checksum and download
            return real_open(remote, mode)

        monkeypatch.setattr(sftp, "open", open_after_a_write)
        with pytest.raises(FetchError, match="expected 7 bytes") as refused:
            fetch(conn, [str(artifact)], tmp_path / "local")
    got, expected = (hashlib.sha256(text).hexdigest()[:12] for text in (b"before\nafter\n", b"before\n"))
    assert f"arrived as 13 bytes sha256 {got}…, expected 7 bytes sha256 {expected}…" in str(refused.value)
    assert not (tmp_path / "local" / "growing.log").exists()


def test_fetch_needs_files_with_distinct_names(target, tmp_path):
    with connect(target) as conn:
        for paths in ([], ["/a/model.bin", "/b/model.bin"], ["/"]):
            with pytest.raises(BadInput, match="distinct base names"):
                fetch(conn, paths, tmp_path)


def test_a_download_cut_by_a_dropped_link_is_unreachable(target, scratch, tmp_path, monkeypatch):
    artifact = scratch / "model.bin"
    artifact.write_text("weights")
    with connect(target) as conn:

        def dropped(*args, **kwargs):
            raise EOFError  # what paramiko raises when the link goes mid-transfer

        monkeypatch.setattr(conn.sftp(), "open", dropped)
        with pytest.raises(Unreachable, match="download of .*model.bin failed: EOFError; run it again to continue"):
            fetch(conn, [str(artifact)], tmp_path)
        assert not conn.is_connected
    assert not (tmp_path / "model.bin").exists()


def test_a_download_cut_mid_file_continues_where_it_stopped(sshd_host, target, scratch, tmp_path, make_proxy):
    """The link closes after the first MiB (a relay in between shuts it: a real cut, not a mock); the next fetch
    sends only the rest. 16 MiB: more than SSH's window lets into the client's buffers before the cut."""
    artifact = scratch / "model.bin"
    artifact.write_bytes(os.urandom(16 << 20))
    proxy = make_proxy((sshd_host.sshd.address, sshd_host.sshd.port))
    through = relayed(target, proxy, tmp_path / "kh")
    local = tmp_path / "local"
    cut_at: list[int] = []

    def cut_once(path, done, size):
        if not cut_at:
            cut_at.append(done)
            proxy.close()

    with connect(through) as conn, pytest.raises(Unreachable, match="run it again to continue"):
        fetch(conn, [str(artifact)], local, cut_once)
    partial = local / ".model.bin.partial"
    left = partial.stat().st_size
    assert cut_at[0] <= left < artifact.stat().st_size
    sent: list[int] = []
    with connect(target) as conn:
        [got] = fetch(conn, [str(artifact)], local, lambda path, done, size: sent.append(done))
    assert (got.transferred, got.resumed_from) == (True, left)
    assert sent[0] > left and sent[-1] == artifact.stat().st_size  # from where it stopped, to the end
    assert (local / "model.bin").read_bytes() == artifact.read_bytes() and not partial.exists()


def test_an_upload_cut_by_a_dropped_link_is_unreachable(target, scratch, package, monkeypatch):
    with connect(target) as conn:

        def dropped(*args, **kwargs):
            raise EOFError

        monkeypatch.setattr(conn.sftp(), "put", dropped)
        with pytest.raises(Unreachable, match="upload to .* failed"):
            push_tree(conn, package, str(scratch / "code"))
        assert not conn.is_connected
