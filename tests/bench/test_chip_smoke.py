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
def test_the_latest_smoke_trained_every_case_on_this_workload_launch():
    found = smoke.latest(RUNS)
    assert found is not None, "no smoke in bench/tpu/runs. Fix: run bench/tpu/cases/smoke.json (docs/development.md)"
    folder, results = found
    ran = results["environment"]
    assert ran["launch_digest"] == smoke.launch_digest(REPO), (
        f"bench/tpu/runs/{folder.name}, the latest smoke, ran workload/launch at {ran['commit']}, and it has changed "
        "since. Fix: run bench/tpu/cases/smoke.json on this commit and commit its results (docs/development.md)"
    )
    assert smoke.untrained(results) == [], f"bench/tpu/runs/{folder.name}: the smoke did not train every case"


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


def _run(runs: Path, name: str, date: str, cases_file: str, outcome: str = "trained") -> None:
    (runs / name).mkdir(parents=True)
    environment = {"date": date, "commit": name, "cases_file": cases_file, "launch_digest": name}
    cases = [{"case": {"name": "smoke-native"}, "outcome": outcome}]
    (runs / name / "results.json").write_text(json.dumps({"environment": environment, "cases": cases}))


def test_the_latest_smoke_is_the_newest_run_of_the_smokes_file(tmp_path):
    assert smoke.latest(tmp_path) is None
    _run(tmp_path, "2026-12-07-9", "2026-12-07T13:10:00+00:00", "smoke.json", "failed: ImportError")
    _run(tmp_path, "2026-12-07-10", "2026-12-07T13:30:00+00:00", "smoke.json")
    _run(tmp_path, "2026-12-07-11", "2026-12-07T14:00:00+00:00", "issue74.json")
    folder, results = smoke.latest(tmp_path) or (None, {})
    assert folder == tmp_path / "2026-12-07-10" and smoke.untrained(results) == []
    _run(tmp_path, "2026-12-08-1", "2026-12-08T09:00:00+00:00", "smoke.json", "failed: ImportError")
    _, results = smoke.latest(tmp_path) or (None, {})
    assert smoke.untrained(results) == ["smoke-native: failed: ImportError"]
