"""What a kept model records of a dataset of files (not a Hub id), for its model card: each file's name, row count
and sha256. The card may not name where the files are (a bucket path is private, and the Hub's `datasets:`
metadata takes Hub ids only), so these are what tells a reader which data trained the model.

The data preflight (workload/preflight/data.py) runs on the user's machine and its record stays there
(.tpu-sft/preflight/); the VM reads the files it trained on itself, at keep, and counts rows the same way: JSON
Lines a non-empty line a row (as `datasets` reads them; the preflight's `_count_lines`), Parquet from the file's
own footer. A file that cannot be read is recorded as such, in one line: the card then says so, and keep goes on.
"""

from __future__ import annotations

import glob
import hashlib
import os
import posixpath
from typing import IO, Any

from workload.core.data_source import LOCAL, parse_source

_CHUNK = 1 << 24


def describe(location: str | None) -> dict[str, Any] | None:
    """{"files": [{"name", "rows", "sha256", "bytes"}, ...]} of a file dataset, {"error": "..."} where it could not
    be read, None for a Hub dataset (its id says which it is)."""
    if location is None:
        return None
    source = parse_source(location)
    if not source.is_file:
        return None
    try:
        files = [_describe_one(name, opener, source.format) for name, opener in _files(location, source.kind)]
    except Exception as error:  # noqa: BLE001  a card fact, never a reason to lose the kept model
        return {"error": f"{type(error).__name__}: {error}".splitlines()[0]}
    if not files:
        return {"error": f"{location} names no file"}
    return {"files": files}


def _files(location: str, kind: str) -> list[tuple[str, Any]]:
    if kind == LOCAL:
        paths = sorted(p for p in glob.glob(os.path.expanduser(location)) if os.path.isfile(p))
        return [(os.path.basename(p), lambda p=p: open(p, "rb")) for p in paths]
    import gcsfs  # the MaxText venv's, as workload/run/storage.py uses it

    fs = gcsfs.GCSFileSystem()
    return [(posixpath.basename(p), lambda p=p: fs.open(p, "rb")) for p in sorted(fs.glob(location))]


def _describe_one(name: str, opener: Any, fmt: str | None) -> dict[str, Any]:
    digest, size, lines = hashlib.sha256(), 0, 0
    with opener() as f:
        tail = b""
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
            size += len(chunk)
            parts = (tail + chunk).split(b"\n")
            tail = parts.pop()
            lines += sum(1 for line in parts if line.strip())
        lines += 1 if tail.strip() else 0
    rows = lines if fmt == "json" else _parquet_rows(opener)
    return {"name": name, "rows": rows, "sha256": digest.hexdigest(), "bytes": size}


def _parquet_rows(opener: Any) -> int:
    import pyarrow.parquet as pq  # the MaxText venv's

    f: IO[bytes]
    with opener() as f:
        return pq.ParquetFile(f).metadata.num_rows
