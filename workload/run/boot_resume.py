"""Resume at boot: the VM's start-up starts the next attempt of the run if, and only if, the last attempt died with
its boot (docs/restarts.md).

Google restarts a TPU VM by itself after host maintenance, a host error or a crash ("Failure recovery of TPU
instances", Cloud TPU docs): same name and disks, an empty /dev/shm, a new boot, and the startup script runs again.
The run's attempt (a detached job, remote/ssh/jobs.py) died with the old boot. Run by the startup script
(infra/resources/startup.py) as the SSH user once the data disk is mounted, this reads the run's latest attempt:

  - an `exit` record, or `cancelled`: it ended on its own (done, failed, `tpu-sft cancel`); a boot never restarts it;
  - its `boot_id` is this boot's: it is this boot's own (the script ran again); nothing to do;
  - otherwise it died with its boot: the next attempt starts, as the same job (its `job.sh` and `run.sh`, the
    record `runs/run-N.json` beside it copied), with the workload's boot-resume flags appended, so that the run
    itself checks the budget in the bucket before any step (workload/run/resume_budget.py) and logs the resume or
    the refusal where `tpu-sft status` reads it. The code, the venv and the token file are the ones on the boot disk,
    which the restart kept; /dev/shm's part (the converted weights, scratch) the run rebuilds as on any new VM.

Copied into the startup script whole, like autostop (at boot the shipped code may be older than the stack): the
standard library of the image's python3 only, nothing of tpu-sft imported.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shutil
import subprocess
import sys
from dataclasses import dataclass

BOOT_ID = "/proc/sys/kernel/random/boot_id"
# The workload's flags of a boot-resumed attempt (workload/__main__.py reads these names from here).
RESUME_OF_FLAG = "--boot-resume-of"
RESUMES_FLAG = "--boot-resumes"
DEADLINE_FLAG = "--resume-deadline-hours"
WAIT_FLAG = "--slice-wait-seconds"  # on a slice, how long its hosts wait for each other (workload/run/slice_rejoin.py)


@dataclass(frozen=True)
class Verdict:
    latest: str | None  # the run's latest attempt on this VM, None if it has none
    resume: bool
    reason: str


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8") as f:
            return f.read().strip()
    except OSError:
        return None


def attempt_number(name: str, prefix: str) -> int | None:
    head, _, number = name.rpartition("-")
    return int(number) if head == prefix and number.isascii() and number.isdigit() else None


def latest_attempt(jobs_root: str, prefix: str) -> str | None:
    try:
        names = os.listdir(jobs_root)
    except OSError:
        return None
    numbered = [(n, name) for name in names if (n := attempt_number(name, prefix)) is not None]
    return max(numbered)[1] if numbered else None


def verdict(jobs_root: str, prefix: str, boot_id: str) -> Verdict:
    """Whether this boot resumes the run, and why (one line)."""
    latest = latest_attempt(jobs_root, prefix)
    if latest is None:
        return Verdict(None, False, "no run on this VM")
    job = os.path.join(jobs_root, latest)
    code = _read(os.path.join(job, "exit"))
    if code is not None:
        return Verdict(latest, False, f"{latest} ended on its own (exit {code}): a boot never restarts it")
    if os.path.exists(os.path.join(job, "cancelled")):
        return Verdict(latest, False, f"{latest} was cancelled: a boot never restarts it")
    if _read(os.path.join(job, "boot_id")) == boot_id:
        return Verdict(latest, False, f"{latest} belongs to this boot")
    return Verdict(latest, True, f"{latest} died with its boot (no exit record, started in another boot)")


def resumed_command(job_sh: str, flags: list[str]) -> str:
    """The dead attempt's job.sh with the boot-resume flags at the end of its command (its last line), replacing
    the flags an earlier boot-resume appended."""
    *head, command = job_sh.rstrip("\n").split("\n")
    command = command.split(f" {RESUME_OF_FLAG} ", 1)[0]
    return "\n".join([*head, " ".join([command, *flags])]) + "\n"


def start_next(
    jobs_root: str, latest: str, prefix: str, limit: int, deadline_hours: float, wait_s: float | None = None
) -> str:
    """Start the attempt after `latest` as its copy (remote/ssh/jobs.py's layout: staged, then renamed into place, so
    it never starts twice), and return its job id."""
    new = f"{prefix}-{int(latest.rpartition('-')[2]) + 1}"
    old_dir, new_dir = os.path.join(jobs_root, latest), os.path.join(jobs_root, new)
    runs = os.path.join(os.path.dirname(jobs_root), "runs")  # remote/pipeline/claim.py's records, beside the jobs
    for suffix in (".json", ".json.until"):
        shutil.copyfile(os.path.join(runs, latest + suffix), os.path.join(runs, new + suffix))
    staging = os.path.join(jobs_root, f".staging-{new}-{secrets.token_hex(4)}")
    os.mkdir(staging, 0o700)
    flags = [RESUME_OF_FLAG, latest, RESUMES_FLAG, str(limit), DEADLINE_FLAG, f"{deadline_hours:g}"]
    flags += [] if wait_s is None else [WAIT_FLAG, f"{wait_s:g}"]
    with open(os.path.join(staging, "job.sh"), "w", encoding="utf-8") as f:
        f.write(resumed_command(_read(os.path.join(old_dir, "job.sh")) or "", flags))
    shutil.copyfile(os.path.join(old_dir, "run.sh"), os.path.join(staging, "run.sh"))
    os.rename(staging, new_dir)  # fails where the job exists: a second boot-resume of the same boot starts nothing
    with open(os.path.join(new_dir, "log"), "wb") as log:
        subprocess.Popen(
            ["setsid", "nohup", "sh", "./run.sh"], cwd=new_dir, stdin=subprocess.DEVNULL, stdout=log, stderr=log
        )
    return new


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs-root", required=True, help="the SSH user's jobs dir (remote/ssh/jobs.py)")
    parser.add_argument("--attempt-prefix", required=True, help="the run's job ids: PREFIX-1, PREFIX-2, …")
    parser.add_argument("--boot-resumes", type=int, required=True, help="tpu-sft:bootResumes, for the run's budget")
    parser.add_argument(
        "--deadline-hours", type=float, required=True, help="no boot-resume later than this after the first"
    )
    parser.add_argument(
        WAIT_FLAG,
        dest="wait_s",
        type=float,
        help="on a slice, how long its hosts wait for each other (default: the workload's, slice_rejoin.WAIT_S)",
    )
    args = parser.parse_args(argv)
    found = verdict(args.jobs_root, args.attempt_prefix, _read(BOOT_ID) or "")
    if not found.resume or found.latest is None:
        print(f"tpu-sft boot-resume: nothing to resume: {found.reason}", flush=True)
        return 0
    try:
        started = start_next(
            args.jobs_root, found.latest, args.attempt_prefix, args.boot_resumes, args.deadline_hours, args.wait_s
        )
    except OSError as error:
        print(f"tpu-sft boot-resume: {found.reason}, but its next attempt cannot start: {error}", flush=True)
        return 1
    print(f"tpu-sft boot-resume: {found.reason}: started {started}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
