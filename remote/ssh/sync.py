"""Files between this machine and the host, verified by size and sha256 and skipped when already there."""

from __future__ import annotations

import fnmatch
import hashlib
import os
import secrets
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable

from remote.ssh.connection import NETWORK_ERRORS, Connection, run
from remote.ssh.errors import BadInput, FetchError, RemoteFileMissing, Unreachable

DEFAULT_EXCLUDE = ("__pycache__", "*.pyc", ".*")
_CHUNK = 1 << 20


@dataclass(frozen=True)
class PushResult:
    uploaded: tuple[str, ...]  # relative paths, sorted
    unchanged: int


@dataclass(frozen=True)
class Fetched:
    remote: str
    local: str
    size: int
    sha256: str
    transferred: bool  # False: the local copy already matched
    resumed_from: int = 0  # bytes a broken transfer had left, which this one continued from


def sha256_file(path: str | Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def push_tree(
    conn: Connection, local_dir: str | Path, remote_dir: str, *, exclude: Iterable[str] = DEFAULT_EXCLUDE
) -> PushResult:
    """Make `remote_dir` hold every file of `local_dir` (names matching `exclude` left out), uploading only
    files whose sha256 differs. Nothing changed: one round trip. Each file is replaced atomically; remote
    files that do not exist locally are left alone."""
    local_dir = Path(local_dir)
    if not local_dir.is_dir():
        raise BadInput(f"{local_dir} is not a directory")
    patterns = tuple(exclude)
    wanted: dict[str, Path] = {}
    for root, dirs, files in os.walk(local_dir):
        dirs[:] = sorted(d for d in dirs if not _excluded(d, patterns))
        for name in files:
            if not _excluded(name, patterns):
                path = Path(root) / name
                wanted[path.relative_to(local_dir).as_posix()] = path
    q_dir = shlex.quote(remote_dir)
    listing = run(conn, f"cd -- {q_dir} 2>/dev/null && find . -type f -exec sha256sum -z -- {{}} + ; true").stdout
    remote_hashes = {}
    for record in filter(None, listing.split("\0")):
        digest, rel = record.split("  ", 1)
        remote_hashes[rel.removeprefix("./")] = digest
    changed = sorted(rel for rel, path in wanted.items() if remote_hashes.get(rel) != sha256_file(path))
    if changed:
        dirs = sorted({str(Path(remote_dir, rel).parent) for rel in changed})
        run(conn, "mkdir -p -- " + " ".join(shlex.quote(d) for d in dirs))
        try:
            sftp = conn.sftp()
            for rel in changed:
                dest = f"{remote_dir}/{rel}"
                tmp = f"{dest}.tmp-{secrets.token_hex(4)}"
                sftp.put(str(wanted[rel]), tmp)
                sftp.chmod(tmp, wanted[rel].stat().st_mode & 0o777)
                sftp.posix_rename(tmp, dest)
        except NETWORK_ERRORS as e:
            conn.close()
            raise Unreachable(conn.host, f"upload to {remote_dir} failed: {type(e).__name__}") from None
    return PushResult(tuple(changed), len(wanted) - len(changed))


def fetch(
    conn: Connection,
    remote_paths: Iterable[str],
    local_dir: str | Path,
    progress: Callable[[str, int, int], None] = lambda path, done, size: None,
) -> list[Fetched]:
    """Copy remote files into `local_dir` (same base names), each verified against the remote size and sha256
    and written atomically; a local copy that already matches is not transferred again, and one a broken transfer
    left part of (`.NAME.partial`) continues from its last byte. `progress(remote path, bytes so far, size)` sees
    each chunk."""
    paths = list(remote_paths)
    names = local_names(paths)
    local_dir = Path(local_dir)
    local_dir.mkdir(parents=True, exist_ok=True)
    script = (
        "for p in " + " ".join(shlex.quote(p) for p in paths) + "; do "
        'if [ -f "$p" ]; then echo "$(stat -c %s -- "$p") $(sha256sum < "$p" | cut -d" " -f1)"; '
        "else echo missing; fi; done"
    )
    lines = run(conn, script).stdout.splitlines()
    fetched = []
    for path, name, line in zip(paths, names, lines, strict=True):
        if line == "missing":
            raise RemoteFileMissing(f"{conn.host}: {path} is not a file")
        size, digest = int(line.split()[0]), line.split()[1]
        dest = local_dir / name
        if dest.is_file() and dest.stat().st_size == size and sha256_file(dest) == digest:
            fetched.append(Fetched(path, str(dest), size, digest, False))
            continue
        tmp = local_dir / f".{name}.partial"
        resumed_from = tmp.stat().st_size if tmp.is_file() and tmp.stat().st_size < size else 0
        try:
            _download(conn, path, tmp, resumed_from, size, progress)
        except NETWORK_ERRORS as e:
            conn.close()
            raise Unreachable(
                conn.host, f"download of {path} failed: {type(e).__name__}; run it again to continue"
            ) from None
        got_size, got_digest = tmp.stat().st_size, sha256_file(tmp)
        if (got_size, got_digest) != (size, digest):
            tmp.unlink()
            raise FetchError(
                f"{conn.host}: {path} arrived as {got_size} bytes sha256 {got_digest[:12]}…, expected {size} bytes "
                f"sha256 {digest[:12]}… (was it still being written?); nothing was saved"
            )
        os.replace(tmp, dest)
        fetched.append(Fetched(path, str(dest), size, digest, True, resumed_from))
    return fetched


def _download(
    conn: Connection, path: str, tmp: Path, offset: int, size: int, progress: Callable[[str, int, int], None]
) -> None:
    """The remote file from byte `offset` on, appended to `tmp` (emptied first when `offset` is 0)."""
    with conn.sftp().open(path, "rb") as remote, open(tmp, "ab" if offset else "wb") as local:
        remote.seek(offset)
        remote.prefetch(size)  # pipelined reads, as sftp.get does: one round trip per chunk would crawl over IAP
        done = offset
        while chunk := remote.read(_CHUNK):
            local.write(chunk)
            done += len(chunk)
            progress(path, done, size)


def local_names(remote_paths: list[str]) -> list[str]:
    """The local file name of each remote file: its base name, which must be a usable and distinct name."""
    names = [Path(p).name for p in remote_paths]
    if not names or len(set(names)) != len(names) or {"", ".", ".."} & set(names):
        raise BadInput("give one or more remote files with distinct base names (not ending in / or ..)")
    return names


def _excluded(name: str, patterns: tuple[str, ...]) -> bool:
    return any(fnmatch.fnmatch(name, p) for p in patterns)
