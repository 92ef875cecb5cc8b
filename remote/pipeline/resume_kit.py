"""What a VM its group recreates needs to resume the run by itself, kept on its data disk (the profile's
`resume_kit`, a SPOT or STANDARD VM under tpu-sft:recovery auto; docs/restarts.md, "After a recreation").

The group recreates the VM with its name and data disk and a **new boot disk**, on which nothing of the run is left,
and nobody SSHes in. So every task that takes the run on such a VM (ship.py `ship`) keeps in the kit, on the mounted
data disk:
- the run's records: the state dir's `jobs` and `runs` are links to the kit's own folders, so each job's exit record,
  cancel mark and boot id, and each attempt's settings, are on the data disk the moment they are written (a copy
  would miss the last ones, which decide whether a boot resumes the run);
- a copy of the code the jobs run (`code`), refreshed by every task;
- the read token (`secrets/hf_token`), 0600 in a 0700 folder (the kit's mode: only the SSH user and root read it);
  never the write token, which only the publish task uses, from the laptop;
- the install, bootstrap's spec as one host script (bootstrap/scheduler.py `install_script`), since the venvs are on
  the boot disk and are rebuilt from the pins rather than kept (gigabytes, and tied to the boot disk's Python).
The VM's start-up restores them on a new boot disk and, where the run died with its VM, starts the next attempt, which
installs first (workload/run/boot_resume.py `--kit`).
"""

from __future__ import annotations

import shlex
from typing import TextIO

from remote.pipeline.bootstrap.scheduler import install_script
from remote.pipeline.claim import from_home
from remote.pipeline.mount import MOUNT_WAIT_S, require_mounted
from remote.pipeline.request import PhaseRequest
from remote.ssh.connection import Connection, run
from workload.core.contract import HF_TOKEN_SECRET, JOBS_DIR

RECORDS = (JOBS_DIR, "runs")  # linked: remote/pipeline/claim.py keeps an attempt's settings in <state>/runs
CODE = "code"  # copied: remote/pipeline/ship.py code_dir
INSTALL = "install.sh"
_ON_BOOT_DISK = "TPU_SFT_RECORDS_ON_BOOT_DISK"


def keep_script(state_dir: str, kit: str, install: str) -> str:
    """The host script that keeps the kit up to date. Records already in a folder of the boot disk (a VM that ran
    before the kit existed) stay there: moving them under a running attempt would lose its exit record."""
    q_kit, state = shlex.quote(kit), from_home(state_dir)
    token = f"secrets/{HF_TOKEN_SECRET}"
    links = " ".join(
        f"{{ [ -L {state}/{name} ] || {{ [ -e {state}/{name} ] && echo {_ON_BOOT_DISK}; }} || "
        f"ln -s -- {q_kit}/{name} {state}/{name}; }} &&"
        for name in RECORDS
    )
    return (
        f"umask 077 && mkdir -p -- {' '.join(f'{q_kit}/{d}' for d in (*RECORDS, 'secrets'))} {state} && {links} "
        f"rm -rf -- {q_kit}/{CODE}.new && cp -a -- {state}/{CODE} {q_kit}/{CODE}.new && "
        f"rm -rf -- {q_kit}/{CODE} && mv -- {q_kit}/{CODE}.new {q_kit}/{CODE} && "
        f"{{ [ ! -s {state}/{token} ] || {{ cp -- {state}/{token} {q_kit}/{token}.new && "
        f"mv -- {q_kit}/{token}.new {q_kit}/{token}; }}; }} && "
        f"printf %s {shlex.quote(install)} > {q_kit}/{INSTALL}.new && mv -- {q_kit}/{INSTALL}.new {q_kit}/{INSTALL}"
    )


def keep(conn: Connection, request: PhaseRequest, out: TextIO, label: str = "") -> None:
    """Keep the kit on the host's data disk, where the profile names one (after `ship` has put the code and the
    token), once the disk is mounted: written anywhere else, it would be on the boot disk it is meant to outlive."""
    profile = request.target.profile
    if profile.resume_kit is None or profile.required_mount is None:
        return
    require_mounted(conn, profile.required_mount, MOUNT_WAIT_S)
    install = install_script(request.target, request.bootstrap_spec())
    done = run(conn, keep_script(request.target.state_dir, profile.resume_kit, install))
    if _ON_BOOT_DISK in done.stdout:
        out.write(
            f"{label}this VM's run records stay on its boot disk (made before tpu-sft kept them on the data disk): "
            "a VM the group recreates will not resume this run by itself; `pulumi up` will\n"
        )
        out.flush()
