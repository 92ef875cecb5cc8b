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

On a VM its group recreated (`--kit`, tpu-sft:recovery auto) the boot disk is new: nothing of the run is on it, but
the data disk holds the kit (remote/pipeline/resume_kit.py). First the state dir gets it back: links to the kit's
record folders (so the verdict below reads the records the old VM wrote to the data disk), a copy of the code and of
the read token. A run that ended stays ended, and nothing is installed for it. The next attempt of a run that died
with its VM begins by installing what the boot disk lost (the kit's install script, skipped where bootstrap's
fingerprint is there), inside the job, so that autostop sees the VM busy and `tpu-sft logs` shows the install.

Copied into the startup script whole, like autostop (at boot the shipped code may be older than the stack): the
standard library of the image's python3 only, nothing of tpu-sft imported.
"""

from __future__ import annotations

import argparse
import os
import secrets
import shlex
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
# The kit's layout, as remote/pipeline/resume_kit.py keeps it: record folders linked into the state dir (the jobs
# root's own name and `runs`, claim.py's), folders copied into it (the code, ship.py's; the read token), the install.
RUNS = "runs"
COPIED = ("code", "secrets")
INSTALL = "install.sh"
# Where bootstrap leaves its fingerprint once every step is installed (remote/pipeline/bootstrap/scheduler.py).
FINGERPRINT = os.path.join("bootstrap", "fingerprint")


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


def restore(kit: str, jobs_root: str) -> list[str]:
    """On a new boot disk, the kit's parts the state dir (the jobs root's parent) lacks: its record folders linked,
    the code and the secrets copied (0600 in a 0700 folder, as the laptop put them). Returns what it restored;
    nothing where the kit has no records (a VM that never ran the run)."""
    restored: list[str] = []
    state = os.path.dirname(jobs_root)
    if not os.path.isdir(os.path.join(kit, RUNS)):
        return restored
    os.makedirs(state, 0o700, exist_ok=True)
    for name in (os.path.basename(jobs_root), RUNS):
        if not os.path.lexists(os.path.join(state, name)) and os.path.isdir(os.path.join(kit, name)):
            os.symlink(os.path.join(kit, name), os.path.join(state, name))
            restored.append(name)
    old = os.umask(0o077)
    try:
        for name in COPIED:
            if os.path.isdir(os.path.join(kit, name)) and not os.path.lexists(os.path.join(state, name)):
                shutil.copytree(os.path.join(kit, name), os.path.join(state, name), symlinks=True)
                restored.append(name)
    finally:
        os.umask(old)
    return restored


def install_line(state: str, install: str) -> str:
    """The job.sh line that installs what a new boot disk lacks before the run's command: the kit's install script,
    unless bootstrap's fingerprint says the install is there (a boot disk Google restarted keeps it)."""
    fingerprint = shlex.quote(os.path.join(state, FINGERPRINT))
    return f"{{ [ -e {fingerprint} ] || sh {shlex.quote(install)}; }} || exit $?"


def resumed_command(job_sh: str, flags: list[str], install: str | None = None) -> str:
    """The dead attempt's job.sh with the boot-resume flags at the end of its command (its last line), replacing
    the flags an earlier boot-resume appended; with `install` (an `install_line`) just before that command, in place
    of the one an earlier boot-resume put there."""
    *head, command = job_sh.rstrip("\n").split("\n")
    command = command.split(f" {RESUME_OF_FLAG} ", 1)[0]
    if install is not None:
        head = [line for line in head if line != install] + [install]
    return "\n".join([*head, " ".join([command, *flags])]) + "\n"


def start_next(
    jobs_root: str,
    latest: str,
    prefix: str,
    limit: int,
    deadline_hours: float,
    wait_s: float | None = None,
    install: str | None = None,
) -> str:
    """Start the attempt after `latest` as its copy (remote/ssh/jobs.py's layout: staged, then renamed into place, so
    it never starts twice), and return its job id. `install`: the kit's install script, which the attempt runs first
    where the boot disk lacks the install."""
    new = f"{prefix}-{int(latest.rpartition('-')[2]) + 1}"
    old_dir, new_dir = os.path.join(jobs_root, latest), os.path.join(jobs_root, new)
    state = os.path.dirname(jobs_root)
    runs = os.path.join(state, RUNS)  # remote/pipeline/claim.py's records, beside the jobs
    for suffix in (".json", ".json.until"):
        shutil.copyfile(os.path.join(runs, latest + suffix), os.path.join(runs, new + suffix))
    staging = os.path.join(jobs_root, f".staging-{new}-{secrets.token_hex(4)}")
    os.mkdir(staging, 0o700)
    flags = [RESUME_OF_FLAG, latest, RESUMES_FLAG, str(limit), DEADLINE_FLAG, f"{deadline_hours:g}"]
    flags += [] if wait_s is None else [WAIT_FLAG, f"{wait_s:g}"]
    with open(os.path.join(staging, "job.sh"), "w", encoding="utf-8") as f:
        line = install_line(state, install) if install is not None else None
        f.write(resumed_command(_read(os.path.join(old_dir, "job.sh")) or "", flags, line))
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
    parser.add_argument(
        "--kit",
        help="on a VM its group recreates: the kit on the data disk (remote/pipeline/resume_kit.py) that a new boot "
        "disk restores the run's records, code and install from",
    )
    args = parser.parse_args(argv)
    said = ""
    if args.kit:
        try:
            restored = restore(args.kit, args.jobs_root)
        except OSError as error:
            print(f"tpu-sft boot-resume: the kit at {args.kit} cannot be restored: {error}", flush=True)
            return 1
        said = f"a new boot disk: restored {', '.join(restored)} from {args.kit}; " if restored else ""
    found = verdict(args.jobs_root, args.attempt_prefix, _read(BOOT_ID) or "")
    if not found.resume or found.latest is None:
        print(f"tpu-sft boot-resume: {said}nothing to resume: {found.reason}", flush=True)
        return 0
    install = os.path.join(args.kit, INSTALL) if args.kit and os.path.isfile(os.path.join(args.kit, INSTALL)) else None
    try:
        started = start_next(
            args.jobs_root,
            found.latest,
            args.attempt_prefix,
            args.boot_resumes,
            args.deadline_hours,
            args.wait_s,
            install,
        )
    except OSError as error:
        print(f"tpu-sft boot-resume: {said}{found.reason}, but its next attempt cannot start: {error}", flush=True)
        return 1
    print(f"tpu-sft boot-resume: {said}{found.reason}: started {started}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
