"""Whether the chip's smoke (bench/tpu/cases/smoke.json) trained every case on this checkout's launcher code. Standard
library only.

The smoke's results name the commit the chip ran, and the digest of `workload/launch` it ran (`launch_digest`): the
files' contents, so that the check reads no git history (a CI clone is shallow, and the results are committed after
the commit they name) and holds for the copy of the working tree the chip was handed.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

CASES_FILE = "smoke.json"
LAUNCH = Path("workload") / "launch"


def launch_digest(root: Path) -> str:
    """sha256 over `workload/launch`'s Python files under `root`: each one's path and contents, in path order."""
    digest = hashlib.sha256()
    for path in sorted((root / LAUNCH).rglob("*.py")):
        digest.update(path.relative_to(root).as_posix().encode() + b"\0" + path.read_bytes() + b"\0")
    return digest.hexdigest()


def cases(repo: Path) -> list[str]:
    """The names of the smoke's cases, in bench/tpu/cases/smoke.json's order."""
    return [case["name"] for case in json.loads((repo / "bench" / "tpu" / "cases" / CASES_FILE).read_text())["cases"]]


def missing(runs: Path, digest: str, names: list[str]) -> list[str]:
    """`case: outcome` for each of `names` whose latest run of the smoke at `digest` under `runs` did not train, or
    `case: not run`. The five cases take longer than one device call, so their latest runs may be in several."""
    latest: dict[str, tuple[str, str]] = {}  # case -> (date, outcome) of its latest run at this digest
    for file in runs.glob("*/results.json"):
        environment = (results := json.loads(file.read_text()))["environment"]
        if environment.get("cases_file") != CASES_FILE or environment.get("launch_digest") != digest:
            continue
        for result in results["cases"]:
            name = result["case"]["name"]
            latest[name] = max(latest.get(name, ("", "")), (environment["date"], str(result.get("outcome"))))
    outcomes = {name: outcome for name, (_, outcome) in latest.items()}
    return [f"{name}: {outcomes.get(name, 'not run')}" for name in names if outcomes.get(name) != "trained"]
