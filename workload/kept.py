"""A model kept on the data disk for exactly these inputs: found, verified and reported instead of redone.

The keep step writes `manifest.json` with the run's identity (the fingerprint of every step's inputs: settings,
run name, tiny model spec, export fix, verify prompt, where it is kept) and the facts a summary reports. A new VM
attached to the same data disk has no done-markers (they were on the lost VM's scratch), but if the manifest's
identity is this run's and every file still has its recorded size and sha256, there is nothing to convert or
train: the identity, never the VM, decides what may be reused.
"""

from __future__ import annotations

import json
import os
from typing import Any

from workload.fingerprint import manifest_mismatches

MANIFEST = "manifest.json"


def read(kept_dir: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(kept_dir, MANIFEST), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def verified(kept_dir: str, identity: str) -> tuple[dict[str, Any] | None, str]:
    """(the manifest, "") when the kept model is this run's and intact; (None, why not) otherwise."""
    found = read(kept_dir)
    if found is None:
        return None, "no kept model"
    if found.get("identity") != identity:
        return None, "the kept model was made from other inputs"
    problems = manifest_mismatches(kept_dir, found.get("files", []))
    if problems:
        return None, f"the kept model differs from its manifest ({problems[0]})"
    return found, ""
