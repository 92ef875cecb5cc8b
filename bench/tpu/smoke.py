"""Which launcher code the chip's smoke (bench/tpu/cases/smoke.json) last trained, against this checkout's. Standard
library only.

The smoke's results name the commit the chip ran, and the digest of `workload/launch` it ran (`launch_digest`): the
files' contents, so that the check reads no git history (a CI clone is shallow, and the results are committed after
the commit they name) and holds for the copy of the working tree the chip was handed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

CASES_FILE = "smoke.json"
LAUNCH = Path("workload") / "launch"


def launch_digest(root: Path) -> str:
    """sha256 over `workload/launch`'s Python files under `root`: each one's path and contents, in path order."""
    digest = hashlib.sha256()
    for path in sorted((root / LAUNCH).rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def latest(runs: Path) -> tuple[Path, dict[str, Any]] | None:
    """The newest run of the smoke under `runs` (by the date its results name), with its results; None if none."""
    found = []
    for file in runs.glob("*/results.json"):
        results = json.loads(file.read_text())
        if results["environment"].get("cases_file") == CASES_FILE:
            found.append((results["environment"]["date"], file.parent, results))
    if not found:
        return None
    _, folder, results = max(found, key=lambda run: run[0])
    return folder, results


def untrained(results: dict[str, Any]) -> list[str]:
    """`case: outcome` for each case of a run that did not train."""
    return [f"{r['case']['name']}: {r.get('outcome')}" for r in results["cases"] if r.get("outcome") != "trained"]
