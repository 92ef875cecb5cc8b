"""`python -m remote start-run`, the run task: it starts the whole run on the host once, with every setting; the
phases follow it; a changed setting starts the next attempt; a phase whose attempt failed starts the next one with
the run's whole settings, not only its own.

The host is a real sshd on this machine. MaxText's venv is a stand-in written into the test's state directory: a
shell script in place of its python that records its argv and prints a summary as each part of the run ends
(`--phase-summaries`), up to its `--until`, or fails while the test's `fail` file exists. (On a slice:
tests/remote/pipeline/test_slice_phase.py.)"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from remote.pipeline.profile import HostProfile
from tests.ssh_testbed import wait_until

REPO = Path(__file__).resolve().parents[3]
STANDIN = """#!/bin/sh
# Stands in for `python -m workload run …`: records its argv, then ends each part of the run up to --until.
state="$(dirname "$0")/../.."
printf '%s\\n' "$@" > "$state/argv-$$"
[ -e "$state/fail" ] && exit 3
until=; previous=; for arg in "$@"; do [ "$previous" = --until ] && until=$arg; previous=$arg; done
for part in convert train keep; do
  echo "{\\"event\\": \\"phase\\", \\"phase\\": \\"$part\\", \\"status\\": \\"start\\"}"
  echo "{\\"event\\": \\"summary\\", \\"phase\\": \\"$part\\", \\"until\\": \\"$part\\", \\"ok\\": true}"
  [ "$part" = "$until" ] && break
done
exit 0
"""


def _settings(steps: int) -> dict[str, str]:
    return {"TPU_SFT_PIPELINE": json.dumps({"profile": "tiny", "steps": steps})}


@pytest.fixture
def host(sshd_host, state_dir, remote_user):
    """The target (no data disk to wait for), with the stand-in installed where the run's venv is."""
    python = state_dir / "maxtext_venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text(STANDIN)
    python.chmod(0o755)
    for path in (state_dir, *state_dir.rglob("*")):
        os.chown(path, remote_user.pw_uid, remote_user.pw_gid)
    profile = HostProfile(name="run-test", scratch_dir=str(state_dir / "scratch"), kept_dir=str(state_dir / "kept"))
    return sshd_host.target(state_dir, profile=profile)


def remote(target, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    environment = {**os.environ, "TPU_SFT_TARGET": target.to_json(), **env}
    environment.pop("HF_TOKEN", None)  # the tiny profile needs none
    return subprocess.run(
        [sys.executable, "-m", "remote", *args], capture_output=True, text=True, env=environment, cwd=REPO, timeout=60
    )


def summary(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout.splitlines()[-1])


def ended(state_dir: Path, job: str) -> None:
    wait_until((state_dir / "jobs" / job / "exit").exists, what=f"{job} to end")


def jobs(state_dir: Path) -> list[str]:
    return sorted(p.name for p in (state_dir / "jobs").iterdir() if not p.name.startswith("."))


def untils(state_dir: Path) -> list[str]:
    """The --until of every attempt the stand-in ran, oldest first."""
    calls = sorted(state_dir.glob("argv-*"), key=lambda p: p.stat().st_mtime_ns)
    return [(argv := p.read_text().splitlines())[argv.index("--until") + 1] for p in calls]


def test_the_run_starts_once_with_every_setting_and_the_first_phase_to_follow_shows_its_part(host, state_dir):
    started = summary(remote(host, "start-run", env=_settings(2)))
    assert started | {"state": None} == {
        "event": "summary",
        "phase": "run",
        "ok": True,
        "job": "run-1",
        "state": None,  # running, or already ended: the stand-in is quick
        "started": True,
    }
    ended(state_dir, "run-1")
    assert untils(state_dir) == ["eval"]  # the whole run, whichever phase comes first
    again = summary(remote(host, "start-run", env=_settings(2)))
    assert (again["job"], again["state"], again["started"]) == ("run-1", "succeeded", False)

    # Train's task is the first to follow: it shows its part, though the run had ended before it came.
    train = remote(host, "phase", "train", env=_settings(2))
    assert summary(train)["until"] == "train"
    assert "train: job run-1 on 127.0.0.1 (succeeded)" in train.stdout and "▶ train" in train.stdout
    assert "▶ convert" not in train.stdout  # not its part
    rerun = remote(host, "phase", "train", env=_settings(2))  # a task followed it before: the summary only
    assert summary(rerun) == summary(train) and "▶ train" not in rerun.stdout
    assert jobs(state_dir) == ["run-1"] and untils(state_dir) == ["eval"]


def test_a_changed_setting_starts_the_next_attempt_with_it(host, state_dir):
    summary(remote(host, "start-run", env=_settings(2)))
    ended(state_dir, "run-1")
    changed = summary(remote(host, "start-run", env=_settings(3)))
    assert (changed["job"], changed["started"]) == ("run-2", True)
    assert json.loads((state_dir / "runs" / "run-2.json").read_text())["steps"] == 3
    ended(state_dir, "run-2")
    assert jobs(state_dir) == ["run-1", "run-2"] and untils(state_dir) == ["eval", "eval"]


def test_a_phase_after_a_failed_attempt_starts_the_whole_run_again(host, state_dir):
    """A phase's own settings stop at its phase; the next attempt it starts is still the whole run, with the settings
    the run task started the failed one with."""
    (state_dir / "fail").touch()
    summary(remote(host, "start-run", env=_settings(3)))
    ended(state_dir, "run-1")
    assert (state_dir / "jobs" / "run-1" / "exit").read_text().strip() == "3"
    (state_dir / "fail").unlink()
    retried = remote(host, "phase", "convert", env={"TPU_SFT_PIPELINE": json.dumps({"profile": "tiny"})})
    assert summary(retried)["until"] == "convert" and "convert: job run-2 on 127.0.0.1" in retried.stdout
    ended(state_dir, "run-2")
    assert untils(state_dir) == ["eval", "eval"]  # the whole run again, not one that ends with convert
    record = [(state_dir / "runs" / f"run-{n}.json").read_text() for n in (1, 2)]
    assert record[0] == record[1] and json.loads(record[1])["steps"] == 3  # train's setting, which convert lacks
