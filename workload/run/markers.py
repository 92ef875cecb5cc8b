"""Done-markers: one JSON file per finished step, holding the fingerprint of its inputs, a manifest of its
outputs and the facts it found (final step, loss, …). A step counts as done only while its fingerprint is
unchanged and its outputs are still there with the recorded sizes; markers are written atomically, last.
"""

from __future__ import annotations

import json
import os
import time
from typing import Any

from workload.run.fingerprint import manifest, manifest_mismatches


def write(
    path: str, *, step: str, fingerprint: str, outputs: str, base: str, facts: dict[str, Any], hashes: bool
) -> dict:
    """`outputs` is stored relative to `base` (the work dir) when inside it, so a work dir can be moved."""
    inside = os.path.commonpath([os.path.abspath(outputs), os.path.abspath(base)]) == os.path.abspath(base)
    marker = {
        "step": step,
        "fingerprint": fingerprint,
        "outputs": os.path.relpath(outputs, base) if inside else outputs,
        "manifest": manifest(outputs, hashes=hashes) if os.path.isdir(outputs) else [_file_entry(outputs)],
        "facts": facts,
        "finished_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(marker, f, indent=1)
    os.replace(tmp, path)
    return marker


def _file_entry(path: str) -> dict[str, Any]:
    return {"path": os.path.basename(path), "size": os.path.getsize(path)}


def read(path: str) -> dict | None:
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def why_not_done(marker: dict | None, fingerprint: str, base: str) -> str | None:
    """None when the step is done with these inputs; otherwise the reason it must run."""
    if marker is None:
        return "not done yet"
    if marker.get("fingerprint") != fingerprint:
        return "its inputs changed"
    outputs = os.path.join(base, marker["outputs"])
    root = outputs if os.path.isdir(outputs) else os.path.dirname(outputs)
    problems = manifest_mismatches(root, marker["manifest"]) if os.path.exists(outputs) else [f"{outputs}: missing"]
    if problems:
        return f"its outputs changed ({problems[0]})"
    return None


def clear(path: str) -> None:
    if os.path.exists(path):
        os.remove(path)
