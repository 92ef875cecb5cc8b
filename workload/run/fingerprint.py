"""Fingerprints of step inputs and manifests of step outputs.

A fingerprint is the sha256 of the canonical JSON of a step's inputs (which include the fingerprint of the
step before it, so a change anywhere re-runs that step and the ones after it). A manifest lists every file
under a directory with its size and, where asked, its sha256.
"""

from __future__ import annotations

import hashlib
import json
import os
from typing import Any

_CHUNK = 1 << 20


def fingerprint(inputs: Any) -> str:
    canonical = json.dumps(inputs, sort_keys=True, separators=(",", ":"), default=list)
    return hashlib.sha256(canonical.encode()).hexdigest()


def file_sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


def manifest(root: str, *, hashes: bool) -> list[dict[str, Any]]:
    """Files under `root` (paths relative to it, sorted). `hashes=False` for multi-GB checkpoints on
    scratch, where presence and size are the check; True for what is kept or published."""
    entries = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            path = os.path.join(dirpath, name)
            entry: dict[str, Any] = {"path": os.path.relpath(path, root), "size": os.path.getsize(path)}
            if hashes:
                entry["sha256"] = file_sha256(path)
            entries.append(entry)
    return entries


def manifest_mismatches(root: str, entries: list[dict[str, Any]]) -> list[str]:
    """Files of a manifest that are missing or differ in size (and in sha256, where recorded)."""
    problems = []
    for entry in entries:
        path = os.path.join(root, entry["path"])
        if not os.path.isfile(path):
            problems.append(f"{entry['path']}: missing")
        elif os.path.getsize(path) != entry["size"]:
            problems.append(f"{entry['path']}: size {os.path.getsize(path)} != {entry['size']}")
        elif "sha256" in entry and file_sha256(path) != entry["sha256"]:
            problems.append(f"{entry['path']}: sha256 differs")
    return problems
