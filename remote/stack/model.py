"""`fetch-model`: the kept model and its manifest (workload/run/kept.py: every file's size and sha256) onto the user's
machine, every file checked against the manifest.

Where from, through Cloud Storage's API (remote/stack/gcs.py) where it can, with no VM: the bucket, where a slice
keeps its model and a VM copies its data disk's (both gs://<bucket>/kept/<run>/: the profile's `kept_dir` or
`kept_copy_dir`); else the copy the publish task made in Cloud Storage (the `published` output), laid out as a Hub repo;
only then the VM's data disk over SSH (remote/ssh/sync.py `fetch`, which checks each file against the VM's own sha256
too): a model kept before the VM copied it to the bucket. Which model: the stack's `modelDir` output (what the last
`pulumi up` saw kept; on a VM the same run's copy in the bucket), else the one whose manifest was written last under
the kept dir. Whatever the source, DIR gets the kept layout (the Hugging Face model in DIR/hf-model/).

A broken transfer resumes: a file already here that matches the manifest is not fetched again, and a partial one
(`.NAME.partial` beside it) continues from its last byte. The manifest is written last, so a folder holding it holds
the whole model. A file whose bytes differ from the manifest is refused, and nothing of it is kept.
"""

from __future__ import annotations

import json
import os
import shlex
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any, Callable

from remote.ssh.connection import Connection, run
from remote.ssh.errors import EXIT_NOT_FOUND, FetchError, RemoteError
from remote.ssh.sync import fetch, sha256_file
from remote.stack.gcs import Gcs
from remote.stack.outputs import StackOutputs
from remote.stack.reach import VmUnreachable, connect_vm, vm_name
from workload.publish import layout as publish_layout
from workload.run.kept import MANIFEST

Progress = Callable[[str, int, int], None]  # file, bytes so far, its size


class NoModel(RemoteError):
    exit_code = EXIT_NOT_FOUND


@dataclass(frozen=True)
class FetchedModel:
    source: str  # gs://… or HOST:PATH
    local_dir: str
    files: int
    transferred: int  # files fetched now (the others were here already, verified)
    resumed: int  # of those, files continued from a partial copy


def fetch_model(
    outputs: StackOutputs,
    dest: Path | None,
    gcs: Gcs,
    *,
    progress: Progress = lambda name, done, size: None,
) -> FetchedModel:
    target = outputs.target()
    model_dir = outputs.text("modelDir")
    kept_root = target.profile.kept_dir
    if (model_dir or kept_root).startswith("gs://"):
        model_dir = (model_dir or _latest_in_bucket(gcs, kept_root)).rstrip("/")
        return _from_bucket(gcs, _kept(model_dir), dest, progress)
    copy_root = target.profile.kept_copy_dir
    copied = None if copy_root is None else _copy_of(gcs, copy_root.rstrip("/"), model_dir)
    if copied is not None:
        return _from_bucket(gcs, copied, dest, progress)
    published = _published_to_gcs(outputs)
    if published is not None:
        return _from_bucket(gcs, published, dest, progress)
    conn = _vm(outputs)
    with conn:
        model_dir = model_dir or _latest_on_vm(conn, kept_root)
        return _from_vm(conn, model_dir, dest, progress)


def kept_in_bucket(outputs: StackOutputs, gcs: Gcs) -> tuple[str, int]:
    """The kept model in the bucket (a slice's, or a VM's copy of its data disk's), as fetch-model finds it: its
    gs:// URL and its files' total size, from its manifest; `NoModel`, in one line, where the bucket holds none."""
    target = outputs.target()
    model_dir = outputs.text("modelDir")
    kept_root = target.profile.kept_dir
    copy: Copy | None
    if (model_dir or kept_root).startswith("gs://"):
        copy = _kept((model_dir or _latest_in_bucket(gcs, kept_root)).rstrip("/"))
    else:
        copy_root = target.profile.kept_copy_dir
        copy = None if copy_root is None else _copy_of(gcs, copy_root.rstrip("/"), model_dir)
    if copy is None:
        raise NoModel(
            "the bucket holds no copy of the kept model (it was kept on the VM's data disk before the VM copied it "
            "there): publish it from the VM with tpu-sft:publishHubRepo or publishGcsUri and `pulumi up`"
        )
    return copy.url, kept_size(gcs, copy.url)


def kept_size(gcs: Gcs, model_url: str) -> int:
    """The total size of the files the kept manifest at `model_url` (gs://…) lists; `NoModel` where it has none."""
    copy = _kept(model_url.rstrip("/"))
    data = gcs.read(copy.manifest)
    if data is None:
        raise NoModel(f"{copy.manifest} is missing: no model kept there yet (see `status`)")
    entries = _entries(_manifest(data, copy.manifest), copy.manifest)
    return sum(int(entry["size"]) for entry in entries)


def _vm(outputs: StackOutputs) -> Connection:
    """The VM holding the model on its data disk (a model in the bucket, kept or published, was fetched from there
    before this). One stopped for good is never started (a person cannot start a TPU VM): `pulumi up` replaces it,
    with the same data disk, and verifies the kept model there; one Google is restarting is waited for."""
    try:
        return connect_vm(outputs, outputs.target())
    except VmUnreachable as error:
        state = error.state
        if state is None or not state.stopped:
            said = f"the model is on the VM's data disk, and {error}; then fetch-model again"
            raise VmUnreachable(said, state) from None
        raise VmUnreachable(
            f"the model is on the data disk of VM {vm_name(outputs)}, which is stopped for good ({state.state}; a "
            "person cannot start a TPU VM): run `pulumi up`, which replaces it with the same data disk, then "
            "fetch-model again",
            state,
        ) from None


def _manifest(data: bytes | str, where: str) -> dict[str, Any]:
    try:
        manifest = json.loads(data)
    except ValueError:
        raise FetchError(f"{where} is not JSON: not a kept model's manifest") from None
    if not isinstance(manifest, dict):
        raise FetchError(f"{where} is not a JSON object: not a kept model's manifest")
    return manifest


def _entries(manifest: dict[str, Any], where: str) -> list[dict[str, Any]]:
    files = manifest.get("files")
    if not isinstance(files, list) or not files:
        raise FetchError(f"{where} lists no files: not a kept model's manifest")
    for entry in files:
        path = PurePosixPath(str(entry.get("path", "")))
        if path.is_absolute() or ".." in path.parts or not entry.get("sha256"):
            raise FetchError(f"{where}: entry {entry.get('path')!r} is not a file of the model with its sha256")
    return files


def _local_dir(dest: Path | None, manifest: dict[str, Any], model_dir: str) -> Path:
    """DIR as given, else models/<the run's name>."""
    named = str(manifest.get("run_name") or PurePosixPath(model_dir.rstrip("/")).name)
    return dest or Path("models") / PurePosixPath(named).name  # a name, never a path out of models/


def _verified(local: Path, entry: dict[str, Any]) -> bool:
    return local.is_file() and local.stat().st_size == entry["size"] and sha256_file(local) == entry["sha256"]


def _write_manifest(local_dir: Path, data: bytes) -> None:
    tmp = local_dir / f".{MANIFEST}.partial"
    tmp.write_bytes(data)
    os.replace(tmp, local_dir / MANIFEST)


# ---- from the bucket
@dataclass(frozen=True)
class Copy:
    """A kept model in Cloud Storage: where its manifest is, and where each of the manifest's files is."""

    url: str
    manifest: str
    object_of: Callable[[str], str]  # a path in the manifest → its object's gs:// URL


def _kept(url: str) -> Copy:
    """A model kept in the bucket (workload/run/kept.py): its manifest and files side by side."""
    return Copy(url, f"{url}/{MANIFEST}", lambda path: f"{url}/{path}")


def _copy_of(gcs: Gcs, copy_root: str, model_dir: str | None) -> Copy | None:
    """The VM's copy in the bucket of the model on its data disk (`model_dir`: the same run's; None: the latest), or
    None while the bucket holds no manifest for it (kept before the copy was made, or the copy is not finished)."""
    if model_dir is not None:
        url = f"{copy_root}/{PurePosixPath(model_dir.rstrip('/')).name}"
        return _kept(url) if gcs.read(f"{url}/{MANIFEST}") is not None else None
    try:
        return _kept(_latest_in_bucket(gcs, copy_root))
    except NoModel:
        return None


def _published_to_gcs(outputs: StackOutputs) -> Copy | None:
    """The copy the publish task made in Cloud Storage (the `published` output names it), laid out as a Hub repo
    (workload/publish/layout.py): the manifest under tpu-sft/, each file where the layout put it."""
    published = outputs.values.get("published")
    uri = next((k for k in published if k.startswith("gs://")), None) if isinstance(published, dict) else None
    if uri is None:
        return None
    uri = uri.rstrip("/")
    return Copy(uri, f"{uri}/{publish_layout.MANIFEST}", lambda path: f"{uri}/{publish_layout.destination_path(path)}")


def _latest_in_bucket(gcs: Gcs, kept_root: str) -> str:
    _, runs = gcs.listing(kept_root)
    written = []
    for name in runs:
        objects, _ = gcs.listing(f"{kept_root}/{name}")
        if MANIFEST in objects:
            written.append((objects[MANIFEST].get("updated", ""), f"{kept_root}/{name}"))
    if not written:
        raise NoModel(f"no kept model in {kept_root} yet: the run has not finished its keep step (see `status`)")
    return max(written)[1]


def _from_bucket(gcs: Gcs, copy: Copy, dest: Path | None, progress: Progress) -> FetchedModel:
    data = gcs.read(copy.manifest)
    if data is None:
        raise NoModel(f"{copy.manifest} is missing: no model kept there yet (see `status`)")
    manifest = _manifest(data, copy.manifest)
    entries = _entries(manifest, copy.manifest)
    local_dir = _local_dir(dest, manifest, copy.url)
    transferred = resumed = 0
    for entry in entries:
        local = local_dir / entry["path"]
        if _verified(local, entry):
            continue
        local.parent.mkdir(parents=True, exist_ok=True)
        partial = local.parent / f".{local.name}.partial"
        had = partial.stat().st_size if partial.is_file() else 0
        if had > entry["size"]:
            partial.unlink()
            had = 0
        url = copy.object_of(entry["path"])
        done = had
        if had < entry["size"]:

            def moved(n: int, url: str = url, size: int = entry["size"]) -> None:
                nonlocal done
                done += n
                progress(url, done, size)

            gcs.download(url, partial, moved)
        got_size, got_sha = partial.stat().st_size, sha256_file(partial)
        if (got_size, got_sha) != (entry["size"], entry["sha256"]):
            partial.unlink()
            raise FetchError(
                f"{url} arrived as {got_size} bytes sha256 {got_sha[:12]}…, but the manifest says {entry['size']} "
                f"bytes sha256 {entry['sha256'][:12]}…: the copy in the bucket is damaged; nothing of it was kept"
            )
        os.replace(partial, local)
        transferred += 1
        resumed += bool(had)
    _write_manifest(local_dir, data)
    return FetchedModel(copy.url, str(local_dir), len(entries), transferred, resumed)


# ---- from the VM
def _latest_on_vm(conn: Connection, kept_root: str) -> str:
    found = run(conn, f"ls -1t -- {shlex.quote(kept_root)}/*/{MANIFEST} 2>/dev/null | head -n 1; true").stdout.strip()
    if not found:
        raise NoModel(f"{conn.host}: no kept model in {kept_root} yet: the run has not finished its keep step")
    return found.rsplit("/", 1)[0]


def _from_vm(conn: Connection, model_dir: str, dest: Path | None, progress: Progress) -> FetchedModel:
    manifest_path = f"{model_dir.rstrip('/')}/{MANIFEST}"
    read = run(conn, f"cat -- {shlex.quote(manifest_path)} 2>/dev/null; true").stdout
    if not read:
        raise NoModel(f"{conn.host}: {manifest_path} is missing: no model kept there yet (see `status`)")
    manifest = _manifest(read, f"{conn.host}:{manifest_path}")
    entries = _entries(manifest, f"{conn.host}:{manifest_path}")
    local_dir = _local_dir(dest, manifest, model_dir)
    by_dir: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for entry in entries:
        by_dir[str(PurePosixPath(entry["path"]).parent)].append(entry)
    transferred = resumed = 0
    for sub, group in sorted(by_dir.items()):
        # Files here that match the manifest are not asked of the VM at all (it would hash them again).
        wanted = [e for e in group if not _verified(local_dir / e["path"], e)]
        if not wanted:
            continue
        remote = [f"{model_dir.rstrip('/')}/{e['path']}" for e in wanted]
        for entry, got in zip(wanted, fetch(conn, remote, local_dir / sub, progress), strict=True):
            if (got.size, got.sha256) != (entry["size"], entry["sha256"]):
                os.remove(got.local)
                raise FetchError(
                    f"{conn.host}:{got.remote} is {got.size} bytes sha256 {got.sha256[:12]}…, but the manifest says "
                    f"{entry['size']} bytes sha256 {entry['sha256'][:12]}…: the kept copy is damaged; nothing of it "
                    "was kept"
                )
            transferred += got.transferred
            resumed += bool(got.resumed_from)
    _write_manifest(local_dir, read.encode())
    return FetchedModel(f"{conn.host}:{model_dir}", str(local_dir), len(entries), transferred, resumed)
