"""Running the workload CLI from tests: the tiny settings, one invocation, and one invocation killed
after its first training checkpoint."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import pytest

from rehearsal.gcs_emulator import GcsEmulator
from tests.procs import outliving, processes

REPO = Path(__file__).resolve().parents[2]
MAXTEXT_PYTHON = REPO / ".maxtext-venv" / "bin" / "python"
EVAL_PYTHON = REPO / ".eval-venv" / "bin" / "python"  # scripts/eval-venv: lm-eval over the MaxText venv
# Tiny settings: a learning rate high enough that 30 steps visibly move bf16 weights (at the default 2e-5 they
# may not), and a checkpoint every 10 steps so an interruption after step 10 leaves something to resume from.
CHECKPOINT_PERIOD = 10
# Held-out passes at steps 0 and 30, and where the resumed attempt starts, two batches each: each pass restarts
# MaxText's data worker (~17 s of CPU here), so no pass in between.
# The seed's loop, Tunix's: the tiny pipeline and the tests beside it read its checkpoint layout and numbering;
# MaxText's own loop, the default, runs in the rehearsals and beside Tunix's in tests/workload/test_trainer_parity.py.
TINY_SETTINGS = {
    "profile": "tiny",
    "trainer": "tunix",
    "steps": 30,
    "checkpointPeriod": CHECKPOINT_PERIOD,
    "learningRate": 0.001,
    "evalInterval": 30,
    "evalSteps": 2,
}
# In either loop's command line (workload/run/commands.py): MaxText's own loop's module name begins with Tunix's.
TRAINER = "maxtext.trainers.post_train.sft.train_sft"
# One runner invocation: the whole tiny pipeline takes ~5 min here alone; its resumed half (train, export, verify)
# took over 15 min in a suite run with cold caches.
STEP_LIMIT_S = 1800


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
    return [
        python,
        "-m",
        "workload",
        "run",
        "--config",
        str(config),
        "--work-dir",
        str(work),
        "--output-dir",
        str(out),
        *extra,
    ]


def run_workload(python: str, config: Path, work: Path, out: Path, *extra: str, env: dict | None = None) -> Run:
    """One invocation; `env`, where given, added to the inherited environment (the trainer's and every step's)."""
    started = time.monotonic()
    done = subprocess.run(
        workload_argv(python, config, work, out, *extra),
        cwd=REPO,
        env=_inherited_and(env),
        capture_output=True,
        text=True,
        timeout=STEP_LIMIT_S,
        stdin=subprocess.DEVNULL,
    )
    return Run(done.returncode, parse_events(done.stdout), time.monotonic() - started, done.stderr)


def copy_converted(converted: Path, work: Path) -> None:
    """Starts `work` as a copy of the `tiny_converted` work dir: a run whose convert inputs are the tiny settings'
    skips assets and convert, whose done-markers name their outputs relative to the work dir."""
    shutil.copytree(converted, work)


def first_logged_step(log_path: str) -> int | None:
    """The first training step a trainer's log reports done: a resumed attempt's is its checkpoint's step + 1."""
    with open(log_path, errors="replace") as f:
        match = re.search(r"completed step: (\d+)", f.read())
    return int(match.group(1)) if match else None


def optimizer_step_counts(
    python: str, gcs: GcsEmulator, optimizer_state: str, tmp: Path, env: dict | None = None
) -> dict[str, int]:
    """The step counters of a checkpoint's optimizer state in the bucket (tests/workload/optimizer_steps.py) but
    optax.MultiSteps' mini step: the optimizer's step, its gradient step, Adam's count and the schedule's. Read from a
    copy: orbax restoring without a target reads the `_sharding` file through tensorstore, which refuses
    gcp-storage-emulator's object generations ("Malformed StorageGeneration"). `env`, where given, is added to the
    reader's environment (a run over more devices: its checkpoint's sharding names them)."""
    local = tmp / "optimizer_state"
    gcs.download(optimizer_state, local)
    done = subprocess.run(
        [python, str(REPO / "tests" / "workload" / "optimizer_steps.py"), str(local)],
        env=_inherited_and({"JAX_PLATFORMS": "cpu", **(env or {})}),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    counters = json.loads(done.stdout.splitlines()[-1])
    return {path: value for path, value in counters.items() if "mini_step" not in path}


def _inherited_and(env: dict | None) -> dict | None:
    """The environment a step's process gets: this one's, with `env` over it where given."""
    return None if env is None else {**os.environ, **env}


def from_converted(converted: Path, tmp: Path, settings: dict) -> tuple[Path, Path, Path]:
    """(work dir, output dir, settings file) of a run of `settings` in `tmp`, its work dir a copy of the
    `tiny_converted` one."""
    work, out, config = tmp / "work", tmp / "out", tmp / "settings.json"
    copy_converted(converted, work)
    config.write_text(json.dumps(settings))
    return work, out, config


def run_from_converted(python: str, converted: Path, tmp: Path, settings: dict) -> Run:
    """A whole run of `settings` in `tmp`, from a copy of the `tiny_converted` work dir."""
    work, out, config = from_converted(converted, tmp, settings)
    return run_workload(python, config, work, out)


def latest_checkpoint(runs: Path) -> int | None:
    """The last finished checkpoint under a local runs dir (orbax renames a finished step into place)."""
    steps = [
        int(p.parent.name)
        for p in runs.glob("gemma3-4b/post-train/*/checkpoints/*/model_params")
        if p.parent.name.isdigit()
    ]
    return max(steps, default=None)


@dataclass
class TrainerKill:
    """What the runner did after its trainer was kill -9'd (what the kernel's OOM killer does)."""

    trainer_children: list[str]  # the trainer's own children just before the kill ("pid cmdline")
    runner_ended_after_s: float | None  # None: the runner was still running 30 s after the kill
    left_behind: list[str]  # processes of the run alive after the runner ended: its session, or naming its dirs


@dataclass
class TinyPipeline:
    config: Path
    work: Path
    out: Path
    gcs: GcsEmulator
    runs_prefix: str  # the object prefix of --runs-dir in the emulated bucket
    interrupted: Run  # the first invocation, whose trainer was killed during training
    killed_at_checkpoint: int
    trainer_kill: TrainerKill
    finished: Run  # the second invocation, which resumed from the bucket and went to the end

    @property
    def runs_url(self) -> str:
        return self.gcs.gs(self.runs_prefix)


def _events_so_far(stdout: Path) -> list[dict]:
    """The runner's events in its output so far; a line still being written is left for the next look."""
    events = []
    for line in stdout.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            try:
                events.append(json.loads(line))
            except json.JSONDecodeError:
                pass
    return events


def start_and_kill_trainer_after_checkpoint(
    python: str,
    config: Path,
    work: Path,
    out: Path,
    tmp: Path,
    gcs: GcsEmulator,
    runs_prefix: str,
    ready: Callable[[list[dict]], bool] = lambda events: True,
    env: dict | None = None,
) -> tuple[Run, int, TrainerKill]:
    """Starts the pipeline and, once training has written a checkpoint at `checkpointPeriod` or later into the
    bucket and the runner's events so far are `ready`, SIGKILLs the trainer alone — as the OOM killer would — then
    gives the runner 30 s to end by itself. `env`, where given, is added to the inherited environment."""
    stdout = open(tmp / "interrupted.stdout", "w+")
    started = time.monotonic()
    argv = workload_argv(python, config, work, out, "--runs-dir", gcs.gs(runs_prefix))
    process = subprocess.Popen(
        argv,
        cwd=REPO,
        env=_inherited_and(env),
        stdout=stdout,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
    )
    try:
        while (
            (checkpoint := gcs.latest_checkpoint(runs_prefix)) is None
            or checkpoint < CHECKPOINT_PERIOD
            or not ready(_events_so_far(tmp / "interrupted.stdout"))
        ):
            if process.poll() is not None:
                stdout.seek(0)
                pytest.fail(f"the pipeline ended (exit {process.returncode}) before a checkpoint:\n{stdout.read()}")
            if time.monotonic() - started > STEP_LIMIT_S:
                pytest.fail("no training checkpoint within the time limit")
            time.sleep(0.5)  # each look lists the bucket
        everything = processes()
        trainer = next(p for p in everything if p["ppid"] == process.pid and TRAINER in p["cmdline"])
        children = [f"{p['pid']} {p['cmdline']}" for p in everything if p["ppid"] == trainer["pid"]]
        os.kill(trainer["pid"], signal.SIGKILL)
        killed = time.monotonic()
        try:
            process.wait(timeout=30)
            ended_after: float | None = time.monotonic() - killed
        except subprocess.TimeoutExpired:
            ended_after = None
        left = [
            f"{p['pid']} {p['cmdline']}"
            for p in outliving(
                lambda p: p["session"] == process.pid or str(work) in p["cmdline"] or str(out) in p["cmdline"]
            )
        ]
    finally:
        try:
            os.killpg(process.pid, signal.SIGKILL)  # the runner's own group, if it is still there
        except ProcessLookupError:
            pass
        process.wait()
    stdout.seek(0)
    lines = stdout.read().splitlines()
    events = [json.loads(line) for line in lines if line.startswith("{")]
    # Read after the kill: a checkpoint finished between the poll above and the kill counts too.
    final_checkpoint = gcs.latest_checkpoint(runs_prefix)
    assert final_checkpoint is not None
    return (
        Run(process.returncode, events, time.monotonic() - started, ""),
        final_checkpoint,
        TrainerKill(children, ended_after, left),
    )
