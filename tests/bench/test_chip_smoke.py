"""The chip's smoke (bench/tpu/cases/smoke.json) at this checkout's launcher code (bench/tpu/smoke.py).

CI has no TPU, so a change to what the train phase runs can break the chip's path unnoticed. The `chip` tier reads
the latest smoke's results and fails where the `workload/launch` they ran is not this one, or a case did not train:
it is out of the fast tier, so that anyone's plain `pytest` passes, and in `scripts/test` (`--all-tiers`), which
holds a change to the launcher until the smoke has run on it (docs/development.md, "The chip's smoke")."""

import json
from pathlib import Path

import pytest

from bench.tpu import smoke

REPO = Path(__file__).resolve().parents[2]
RUNS = REPO / "bench" / "tpu" / "runs"


@pytest.mark.chip
def test_every_smoke_case_trained_on_this_workload_launch():
    untrained = smoke.missing(RUNS, smoke.launch_digest(REPO), smoke.cases(REPO))
    assert untrained == [], (
        f"the chip's smoke has not trained {', '.join(untrained)} on this workload/launch. Fix: run "
        "bench/tpu/cases/smoke.json on this commit and commit its results (docs/development.md)"
    )


def _tree(root: Path, launcher: str) -> Path:
    (root / smoke.LAUNCH).mkdir(parents=True)
    (root / smoke.LAUNCH / "trainer_launcher.py").write_text(launcher)
    return root


def test_the_digest_follows_the_launchers_code_and_nothing_else(tmp_path):
    one = smoke.launch_digest(_tree(tmp_path / "a", "x = 1\n"))
    assert smoke.launch_digest(_tree(tmp_path / "b", "x = 1\n")) == one
    assert smoke.launch_digest(_tree(tmp_path / "c", "x = 2\n")) != one
    (tmp_path / "a" / "workload" / "other.py").write_text("y = 1\n")
    (tmp_path / "a" / smoke.LAUNCH / "__pycache__").mkdir()
    (tmp_path / "a" / smoke.LAUNCH / "__pycache__" / "trainer_launcher.cpython-311.pyc").write_bytes(b"\0")
    assert smoke.launch_digest(tmp_path / "a") == one


def _run(
    runs: Path, name: str, date: str, cases: dict[str, str], cases_file: str = "smoke.json", digest: str = "d"
) -> None:
    (runs / name).mkdir(parents=True)
    environment = {"date": date, "commit": name, "cases_file": cases_file, "launch_digest": digest}
    results = [{"case": {"name": case}, "outcome": outcome} for case, outcome in cases.items()]
    (runs / name / "results.json").write_text(json.dumps({"environment": environment, "cases": results}))


def test_each_case_counts_by_its_latest_run_of_the_smoke_at_this_digest(tmp_path):
    names = ["smoke-native", "smoke-qlora-nf4"]
    assert smoke.missing(tmp_path, "d", names) == ["smoke-native: not run", "smoke-qlora-nf4: not run"]
    _run(tmp_path, "2026-12-07-7", "2026-12-07T12:48:21+00:00", {"smoke-native": "trained"})
    assert smoke.missing(tmp_path, "d", names) == ["smoke-qlora-nf4: not run"]
    _run(tmp_path, "2026-12-07-8", "2026-12-07T12:57:00+00:00", {"smoke-qlora-nf4": "killed after 240 s"})
    assert smoke.missing(tmp_path, "d", names) == ["smoke-qlora-nf4: killed after 240 s"]
    _run(tmp_path, "2026-12-07-9", "2026-12-07T13:10:00+00:00", {"smoke-qlora-nf4": "trained"})
    assert smoke.missing(tmp_path, "d", names) == []
    _run(tmp_path, "2026-12-07-10", "2026-12-07T14:00:00+00:00", {"smoke-native": "failed"}, cases_file="issue74.json")
    _run(tmp_path, "2026-12-07-11", "2026-12-07T14:10:00+00:00", {"smoke-native": "failed"}, digest="other")
    assert smoke.missing(tmp_path, "d", names) == []
    _run(tmp_path, "2026-12-08-1", "2026-12-08T09:00:00+00:00", {"smoke-native": "failed: ImportError"})
    assert smoke.missing(tmp_path, "d", names) == ["smoke-native: failed: ImportError"]
