"""Running the workload CLI from tests: the tiny settings, one invocation, and one invocation killed
after its first training checkpoint."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.workload.gcs_emulator import GcsEmulator

REPO = Path(__file__).resolve().parents[2]
MAXTEXT_PYTHON = REPO / ".maxtext-venv" / "bin" / "python"
# Tiny settings: a learning rate high enough that 30 steps visibly move bf16 weights (at the default 2e-5 they
# may not), and a checkpoint every 10 steps so an interruption after step 10 leaves something to resume from.
CHECKPOINT_PERIOD = 10
TINY_SETTINGS = {"profile": "tiny", "steps": 30, "checkpointPeriod": CHECKPOINT_PERIOD, "learningRate": 0.001}
STEP_LIMIT_S = 900  # one runner invocation; the whole tiny pipeline takes ~5 min here


@dataclass
class Run:
    returncode: int
    events: list[dict]
    seconds: float
    stderr: str

    @property
    def summary(self) -> dict:
        return self.events[-1]

    def phases(self, status: str) -> list[str]:
        return [e["phase"] for e in self.events if e["event"] == "phase" and e["status"] == status]


def parse_events(stdout: str) -> list[dict]:
    events = [json.loads(line) for line in stdout.splitlines()]  # every stdout line must be JSON
    assert events and events[-1]["event"] == "summary", "the last stdout line must be the summary"
    return events


def workload_argv(python: str, config: Path, work: Path, out: Path, *extra: str) -> list[str]:
    return [python, "-m", "workload", "run", "--config", str(config), "--work-dir", str(work),
            "--output-dir", str(out), *extra]


def run_workload(python: str, config: Path, work: Path, out: Path, *extra: str) -> Run:
    started = time.monotonic()
    done = subprocess.run(workload_argv(python, config, work, out, *extra), cwd=REPO, capture_output=True,
                          text=True, timeout=STEP_LIMIT_S, stdin=subprocess.DEVNULL)
    return Run(done.returncode, parse_events(done.stdout), time.monotonic() - started, done.stderr)


def latest_checkpoint(runs: Path) -> int | None:
    """The last finished checkpoint under a local runs dir (orbax renames a finished step into place)."""
    steps = [int(p.parent.name) for p in runs.glob("gemma3-4b/post-train/*/checkpoints/*/model_params")
             if p.parent.name.isdigit()]
    return max(steps, default=None)


def latest_checkpoint_in_bucket(gcs: GcsEmulator, prefix: str) -> int | None:
    """The last finished checkpoint under a gs:// runs prefix: on Cloud Storage orbax writes `commit_success.txt`
    into a step's directory when the step is complete."""
    steps = [int(parts[-2]) for parts in (name.split("/") for name in gcs.objects(prefix))
             if parts[-1] == "commit_success.txt" and parts[-3] == "checkpoints" and parts[-2].isdigit()]
    return max(steps, default=None)


@dataclass
class TinyPipeline:
    config: Path
    work: Path
    out: Path
    gcs: GcsEmulator
    runs_prefix: str  # the object prefix of --runs-dir in the emulated bucket
    interrupted: Run  # the first invocation, killed during training
    killed_at_checkpoint: int
    finished: Run  # the second invocation, which resumed from the bucket and went to the end

    @property
    def runs_url(self) -> str:
        return self.gcs.gs(self.runs_prefix)


def start_and_kill_after_checkpoint(python: str, config: Path, work: Path, out: Path, tmp: Path, gcs: GcsEmulator,
                                    runs_prefix: str) -> tuple[Run, int]:
    """Starts the pipeline and SIGKILLs its process group once training has written a checkpoint at
    `checkpointPeriod` or later into the bucket — as a preempted VM or a lost SSH session would."""
    stdout = open(tmp / "interrupted.stdout", "w+")
    started = time.monotonic()
    argv = workload_argv(python, config, work, out, "--runs-dir", gcs.gs(runs_prefix))
    process = subprocess.Popen(argv, cwd=REPO, stdout=stdout, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                               start_new_session=True)
    try:
        while (checkpoint := latest_checkpoint_in_bucket(gcs, runs_prefix)) is None or checkpoint < CHECKPOINT_PERIOD:
            if process.poll() is not None:
                stdout.seek(0)
                pytest.fail(f"the pipeline ended (exit {process.returncode}) before a checkpoint:\n{stdout.read()}")
            if time.monotonic() - started > STEP_LIMIT_S:
                pytest.fail("no training checkpoint within the time limit")
            time.sleep(0.5)
    finally:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    stdout.seek(0)
    lines = stdout.read().splitlines()
    events = [json.loads(line) for line in lines if line.startswith("{")]
    return Run(process.returncode, events, time.monotonic() - started, ""), checkpoint

