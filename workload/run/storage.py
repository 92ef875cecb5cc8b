"""Where a run's training outputs persist: a local directory (the data disk, or scratch in tests) or a Cloud
Storage prefix (`gs://bucket/prefix`). The few operations the runner needs, chosen once by the URL's scheme,
so no step branches on where its files are. MaxText itself writes and reads these URLs (orbax/tensorstore for
checkpoints, tensorboardX for event files); this module is only what the runner does around it.

Cloud Storage goes through gcsfs (in the MaxText venv), imported only when a gs:// URL is used. gcsfs honours
STORAGE_EMULATOR_HOST, so tests point it at a local Cloud Storage API server.
"""

from __future__ import annotations

import os
import posixpath
import shutil
from typing import Callable

GCS_SCHEME = "gs://"


def client_env(url: str) -> dict[str, str]:
    """What MaxText's own clients need to reach `url`. orbax walks directories through etils.epath, which picks
    TensorFlow's tf.io.gfile for gs:// whenever TensorFlow is installed (MaxText's venv has it), unless
    EPATH_USE_TF is false; gfile's Cloud Storage client ignores STORAGE_EMULATOR_HOST and always calls
    www.googleapis.com. With it false, epath uses fsspec (gcsfs) — the same client as this module — while the
    array data goes through tensorstore and TensorBoard through google-cloud-storage either way. Set on the VM
    too, so the path the tests take on a local Cloud Storage API is the path a real run takes."""
    return {"EPATH_USE_TF": "false"} if is_remote(url) else {}


def is_remote(url: str) -> bool:
    return url.startswith(GCS_SCHEME)


def join(url: str, *parts: str) -> str:
    return posixpath.join(url, *parts) if is_remote(url) else os.path.join(url, *parts)


class _Local:
    def list_dirs(self, url: str) -> list[str]:
        try:
            return sorted(n for n in os.listdir(url) if os.path.isdir(os.path.join(url, n)))
        except FileNotFoundError:
            return []

    def is_dir(self, url: str) -> bool:
        return os.path.isdir(url)

    def read_bytes(self, url: str) -> bytes | None:
        try:
            with open(url, "rb") as f:
                return f.read()
        except FileNotFoundError:
            return None

    def write_bytes(self, url: str, data: bytes) -> None:
        os.makedirs(os.path.dirname(url), exist_ok=True)
        tmp = f"{url}.tmp"
        with open(tmp, "wb") as f:
            f.write(data)
        os.replace(tmp, url)  # a reader never sees half a file

    def files(self, url: str) -> dict[str, int]:
        found = {}
        for dirpath, _, filenames in os.walk(url):
            for name in filenames:
                path = os.path.join(dirpath, name)
                found[os.path.relpath(path, url)] = os.path.getsize(path)
        return found

    def download(self, url: str, local_dir: str) -> None:
        shutil.copytree(url, local_dir, dirs_exist_ok=True)

    def upload(self, local_path: str, url: str) -> None:
        os.makedirs(os.path.dirname(url), exist_ok=True)
        shutil.copy2(local_path, url)

    def remove_tree(self, url: str) -> None:
        if os.path.isfile(url):
            os.remove(url)
        else:
            shutil.rmtree(url, ignore_errors=True)


class _Gcs:
    def __init__(self) -> None:
        import gcsfs  # the MaxText venv's; only a gs:// URL needs it

        # No listing cache: another VM (or MaxText in a child process) writes under the same prefix.
        self.fs = gcsfs.GCSFileSystem(cache_timeout=0)

    def list_dirs(self, url: str) -> list[str]:
        try:
            entries = self.fs.ls(url, detail=True, refresh=True)
        except FileNotFoundError:
            return []
        return sorted(posixpath.basename(e["name"].rstrip("/")) for e in entries if e["type"] == "directory")

    def is_dir(self, url: str) -> bool:
        return self.fs.isdir(url)

    def read_bytes(self, url: str) -> bytes | None:
        try:
            return self.fs.cat_file(url)
        except FileNotFoundError:
            return None

    def write_bytes(self, url: str, data: bytes) -> None:
        self.fs.pipe_file(url, data)  # one object upload: readers see the old object or the new one

    def files(self, url: str) -> dict[str, int]:
        root = url[len(GCS_SCHEME) :].rstrip("/")
        found = self.fs.find(url, detail=True)
        return {posixpath.relpath(name, root): int(info["size"]) for name, info in found.items()}

    def download(self, url: str, local_dir: str) -> None:
        for relative in self.files(url):
            target = os.path.join(local_dir, relative)
            os.makedirs(os.path.dirname(target), exist_ok=True)
            self.fs.get_file(join(url, relative), target)

    def upload(self, local_path: str, url: str) -> None:
        self.fs.put_file(local_path, url)

    def remove_tree(self, url: str) -> None:
        if self.fs.exists(url):
            self.fs.rm(url, recursive=True)


_gcs: _Gcs | None = None


def _backend(url: str) -> _Local | _Gcs:
    global _gcs
    if not is_remote(url):
        return _LOCAL
    if _gcs is None:
        _gcs = _Gcs()
    return _gcs


_LOCAL = _Local()


def list_dirs(url: str) -> list[str]:
    """Names of the directories directly under `url` (none if it does not exist)."""
    return _backend(url).list_dirs(url)


def is_dir(url: str) -> bool:
    return _backend(url).is_dir(url)


def read_text(url: str) -> str | None:
    data = _backend(url).read_bytes(url)
    return None if data is None else data.decode("utf-8")


def write_text(url: str, text: str) -> None:
    _backend(url).write_bytes(url, text.encode("utf-8"))


def files(url: str) -> dict[str, int]:
    """Every file under `url`, relative path → size in bytes."""
    return _backend(url).files(url)


def download(url: str, local_dir: str) -> None:
    """Copy the tree at `url` into `local_dir` (which may exist)."""
    _backend(url).download(url, local_dir)


def upload_tree(local_dir: str, url: str, *, last: str) -> None:
    """Copy the files under `local_dir` to `url`, replacing what was there, with the file named `last` written
    after all the others: a reader that trusts that file never sees a half-copied tree."""
    backend = _backend(url)
    backend.remove_tree(join(url, last))  # first: a recursive delete's order is the store's, not ours
    backend.remove_tree(url)
    names = sorted(_LOCAL.files(local_dir), key=lambda name: name == last)
    for relative in names:
        backend.upload(os.path.join(local_dir, relative), join(url, *relative.split(os.sep)))


def rewrite_files(url: str, name_prefix: str, rewrite: Callable[[bytes], bytes | None]) -> list[str]:
    """For every file under `url` whose name starts with `name_prefix`: `rewrite(content)` → new content, or
    None to leave it. Returns the files rewritten."""
    backend = _backend(url)
    changed = []
    for relative in sorted(backend.files(url) if backend.is_dir(url) else {}):
        if not posixpath.basename(relative).startswith(name_prefix):
            continue
        path = join(url, relative)
        data = backend.read_bytes(path)
        new = rewrite(data) if data is not None else None
        if new is not None:
            backend.write_bytes(path, new)
            changed.append(path)
    return changed
