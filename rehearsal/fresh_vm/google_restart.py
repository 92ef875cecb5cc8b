"""Google's own restarts of the fresh-VM rehearsal's VM (machine.py `FreshVm.restart`), and what the VM does after
each with nobody at the laptop (docs/restarts.md):

- mid-training, once a checkpoint newer than the one training resumed from is in the bucket: the VM's start-up must
  start the run's next attempt, which resumes from that checkpoint and runs to keep;
- after the run has finished: the start-up must start nothing.

What each restart shows is read from the VM itself: the startup script's boot-resume line on its console, the jobs
on its boot disk, the MaxText log in its /dev/shm, and the attempt's own progress events (its job log).
"""

from __future__ import annotations

import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rehearsal.fresh_vm.machine import Boot, FreshVm
from workload.core.contract import JOBS_DIR, SCRATCH_DIR, STATE_DIR, run_attempt
from workload.run.events import parse_step
from workload.run.progress import parse_event

BOOT_RESUME_LINE = "tpu-sft boot-resume:"  # workload/run/boot_resume.py's one line, in the startup script's output
STARTUP_WAIT_S = 120
# The attempt the start-up began runs convert again (its output was in /dev/shm), the rest of train, export, verify
# and keep: under the suite's load the same steps took ~450 s on a new VM (bench/RESULTS.md).
ATTEMPT_WAIT_S = 1800


@dataclass
class Restart:
    """One Google restart of the VM and what its start-up did."""

    boot: Boot  # the boot the restart began
    at_checkpoint: int | None  # the bucket's last checkpoint when the old boot ended
    trained_to: int | None  # the last step the old boot's trainer logged (MaxText's numbering), None if none
    startup_line: str  # the startup script's boot-resume line
    jobs_before: list[str]  # the run's attempts on the boot disk when the old boot ended
    jobs_after: list[str] = field(default_factory=list)  # and once the new boot's start-up is done
    attempt: str | None = None  # the attempt the start-up began, if any
    exit_code: int | None = None  # its exit record
    ended_at: float | None = None  # when its exit record was seen
    events: list[dict] = field(default_factory=list)  # its progress events, from its job log

    def first(self, kind: str) -> dict | None:
        return next((e for e in self.events if e.get("event") == kind), None)

    def steps_lost(self, updates: Callable[[int], int]) -> int | None:
        """Updates the old boot's trainer had logged past the checkpoint the attempt resumed from: trained again.
        `updates`: the trainer loop's logged step → updates done (workload/core/trainer_loop.py). The log may end a
        step short of the checkpoint (the boot ended between the save and the step's log line): then none."""
        resumed = self.first("resume")
        if resumed is None or self.trained_to is None:
            return None
        return max(updates(self.trained_to) - resumed["from_step"], 0)


def restart(
    vm: FreshVm, user: str, checkpoint: Callable[[], int | None], gone: Callable[[], None] = lambda: None
) -> Restart:
    """Restart the VM Google's way and wait until its startup script has decided; nothing from the laptop. `gone`
    runs as soon as the old boot has ended, before the new one's sshd answers (a command that followed the run over
    SSH ends there, so it cannot reconnect to the new boot)."""
    trained_to, before = last_logged_step(seen(vm)), run_attempts(seen(vm), user)
    boot = vm.restart()
    gone()
    at = checkpoint()  # once the old boot's trainer is gone: the last checkpoint it made
    _, line = vm.wait_for("startup-script-output", STARTUP_WAIT_S, contains=BOOT_RESUME_LINE)
    vm.wait_for("startup-script-exit", STARTUP_WAIT_S)
    after = run_attempts(seen(vm), user)
    started = [a for a in after if a not in before]
    return Restart(boot, at, trained_to, line, before, after, started[-1] if started else None)


def wait_for_attempt(
    vm: FreshVm, user: str, restarted: Restart, keep_log: Path, timeout_s: float = ATTEMPT_WAIT_S
) -> None:
    """Until the attempt the start-up began has an exit record; then keep its code and events, and its job log at
    `keep_log` (the boot disk goes with the VM), also when it does not end in time."""
    if restarted.attempt is None:
        raise RuntimeError(f"the start-up began no attempt: {restarted.startup_line}")
    deadline = time.monotonic() + timeout_s
    while not ((job := jobs_dir(seen(vm), user) / restarted.attempt) / "exit").exists():  # seen: raises once it stops
        if time.monotonic() > deadline:
            shutil.copyfile(job / "log", keep_log)
            raise TimeoutError(f"{restarted.attempt} did not end within {timeout_s:g} s; its log: {keep_log}")
        time.sleep(1)
    restarted.ended_at = time.time()
    restarted.exit_code = int((job / "exit").read_text().strip())
    shutil.copyfile(job / "log", keep_log)
    lines = keep_log.read_text(errors="replace").splitlines()
    restarted.events = [e for e in map(parse_event, lines) if e is not None]


def seen(vm: FreshVm) -> Path:
    """The running boot's own view of its files."""
    return Path(f"/proc/{vm.pid}/root")


def jobs_dir(root: Path, user: str) -> Path:
    """The SSH user's jobs seen at `root` (remote/ssh/jobs.py; infra/resources/startup.py): on the boot disk, or, on a
    VM its group recreates, on the data disk, where the state dir's link points (remote/pipeline/resume_kit.py). The
    link is the VM's: resolved inside `root`, not on this machine."""
    jobs = root / "home" / user / STATE_DIR / JOBS_DIR
    return root / os.readlink(jobs).lstrip("/") if jobs.is_symlink() else jobs


def run_attempts(root: Path, user: str) -> list[str]:
    """The run's attempts on the boot disk seen at `root`, in order (`run-1`, `run-2`, …, `run-10`)."""
    jobs = jobs_dir(root, user)
    names = [p.name for p in jobs.iterdir()] if jobs.is_dir() else []
    return sorted((n for n in names if run_attempt(n) is not None), key=lambda n: run_attempt(n) or 0)


def last_logged_step(root: Path) -> int | None:
    """The last training step MaxText logged in /dev/shm seen at `root` ("completed step: N"), None if none."""
    logs = root.joinpath(SCRATCH_DIR.lstrip("/"), "logs").glob("train-*.log")
    lines = [line for log in logs for line in log.read_text(errors="replace").splitlines()]
    return max((r["step"] for r in map(parse_step, lines) if r is not None), default=None)


def report(restarts: list[Restart], updates: Callable[[int], int], what: str = "Google restart") -> list[str]:
    """The rehearsal's lines on each restart (or `what` the new boot was): what the start-up did, and for a resumed
    run, boot → first resumed step and the steps trained again (`updates`: the trainer loop's logged step → updates
    done)."""
    lines = []
    for r in restarts:
        lines.append(f"{what}, boot {r.boot.number}: {r.startup_line.strip()}")
        resumed, step = r.first("resume"), r.first("step")
        if resumed is None or step is None:
            continue
        done = "no step" if r.trained_to is None else f"{updates(r.trained_to)} updates"
        lines.append(
            f"  after checkpoint {r.at_checkpoint}: {r.attempt} resumed from update {resumed['from_step']}, "
            f"its first step {step['step']} at +{step['t'] - r.boot.created_at:.0f} s after the boot; steps trained "
            f"again: {r.steps_lost(updates)} (the old boot's trainer had logged {done}); "
            + (f"exit {r.exit_code}" if r.exit_code is not None else "ended by the next boot")
        )
    return lines
