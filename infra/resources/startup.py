"""The VM's startup script (metadata `startup-script`, run as root at every boot): mount the data disk, resume the
run if it died with the last boot (workload/run/boot_resume.py), then start autostop (workload/spend/autostop.py) in
the background.

Resume at boot is a step of this script, not a systemd unit of its own: on a Compute Engine VM the script already
runs under systemd (google-startup-scripts.service, its output in the journal), and the attempt it starts is a job
like any other (remote/ssh/jobs.py), which `tpu-sft status`, `logs`, `cancel`, the phase tasks and autostop read
through its job dir; a unit would be a second record of the same process that none of them reads.

The watcher is copied into the script whole, because at boot nothing of tpu-sft is on the VM yet (the phases
ship workload/ later, over SSH, into the user's home). Its settings travel as metadata attributes, which it
re-reads every poll: a changed tpu-sft:autostop or idleMinutes needs no reboot, and no new script.
"""

from __future__ import annotations

from pathlib import Path

from infra.config.settings import Settings
from infra.resources.disk import mount_script
from workload.core.contract import JOBS_DIR, RESUME_KIT_DIR, RUN_JOB_PREFIX, STATE_DIR
from workload.run import boot_resume
from workload.spend import autostop

WATCHER_SOURCE = Path(autostop.__file__)
WATCHER_PATH = "/var/lib/tpu-sft/autostop.py"
WATCHER_LOG = "/var/log/tpu-sft-autostop.log"
WATCHER_LOCK = "/run/tpu-sft-autostop.lock"  # one watcher per boot, even if the script is run again
_END = "TPU_SFT_AUTOSTOP_PY"
RESUMER_SOURCE = Path(boot_resume.__file__)
RESUMER_PATH = "/var/lib/tpu-sft/boot_resume.py"
_RESUMER_END = "TPU_SFT_BOOT_RESUME_PY"
# The boot-resume deadline where tpu-sft:maxRunHours is off: a day after the run's first boot-resume.
DEADLINE_HOURS_WITHOUT_CAP = 24
# How long a recreated VM's start-up waits for the guest agent to make the SSH user (seconds after boot on a new VM:
# bench/RESULTS.md, "Fresh-VM bootstrap"); past it, the run is not resumed and autostop ends the idle VM.
USER_WAIT_S = 600
# sshd drops a client that stopped answering after 3 minutes, instead of TCP's ~2 hours: a laptop that went
# to sleep mid-`pulumi up` must not hold an SSH session (and so the VM) open. Live clients answer: the remote
# layer's own keepalive is every 15 s.
CLIENT_ALIVE = "/etc/ssh/sshd_config.d/60-tpu-sft-client-alive.conf"


def metadata(s: Settings) -> dict[str, str]:
    """The watcher's settings, as instance metadata attributes (changed in place, without a restart)."""
    return {autostop.ACTION_KEY: s.autostop, autostop.IDLE_KEY: str(s.idle_minutes)}


def startup_script(s: Settings, *, data_disk: bool = True) -> str:
    """The script every boot runs. `data_disk`: whether a data disk is attached to mount (a slice's hosts have
    none: its script starts with the same `#!/bin/bash` and `set -euo pipefail`, without the mount). Every host of a
    slice resumes too: their attempts meet in the bucket and all run or none (workload/run/slice_rejoin.py)."""
    source = WATCHER_SOURCE.read_text()
    jobs_root = f"/home/{s.ssh_user}/{STATE_DIR}/{JOBS_DIR}"
    head = mount_script() if data_disk else "#!/bin/bash\nset -euo pipefail\n"
    return head + "\n".join(
        [
            *resume_lines(s, jobs_root),
            f"printf 'ClientAliveInterval 60\\nClientAliveCountMax 3\\n' > {CLIENT_ALIVE}",
            "systemctl reload ssh 2>/dev/null || true",
            f"install -d -m 755 {Path(WATCHER_PATH).parent}",
            f"cat > {WATCHER_PATH} <<'{_END}'",
            source.rstrip("\n"),
            _END,
            "if command -v python3 >/dev/null; then",
            f"  setsid nohup flock -n {WATCHER_LOCK} python3 {WATCHER_PATH} --jobs-root {jobs_root} "
            f"</dev/null >>{WATCHER_LOG} 2>&1 &",
            "else",
            f"  echo 'tpu-sft: no python3 on this image, so autostop cannot run' >>{WATCHER_LOG}",
            "fi",
            "",
        ]
    )


def resume_lines(s: Settings, jobs_root: str) -> list[str]:
    """After the mount (if any): the run's next attempt, as the SSH user, where the last one died with its boot. Its
    one line of output goes to the script's (the journal) and to the run's log through the attempt itself.

    On a VM its group recreates (`s.recovers`), a new boot disk has no jobs yet but the data disk has the kit
    (RESUME_KIT_DIR, remote/pipeline/resume_kit.py): the resume step restores it, and first waits for the SSH user,
    whom the guest agent makes from the `ssh-keys` metadata after this script has started (on a new boot disk only:
    on any other boot the user exists)."""
    hours = s.max_run_hours or DEADLINE_HOURS_WITHOUT_CAP
    command = (
        f"python3 {RESUMER_PATH} --jobs-root {jobs_root} --attempt-prefix {RUN_JOB_PREFIX} "
        f"--boot-resumes {s.boot_resumes} --deadline-hours {hours}"
    )
    found = f"[ -d {jobs_root} ]"
    wait: list[str] = []
    if s.recovers:
        command += f" --kit {RESUME_KIT_DIR}"
        found = f"{{ {found} || [ -d {RESUME_KIT_DIR}/runs ]; }}"
        wait = [
            f"  for _ in $(seq {USER_WAIT_S}); do id -u {s.ssh_user} >/dev/null 2>&1 && "
            f"[ -d ~{s.ssh_user} ] && break; sleep 1; done",
        ]
    return [
        f"install -d -m 755 {Path(RESUMER_PATH).parent}",
        f"cat > {RESUMER_PATH} <<'{_RESUMER_END}'",
        RESUMER_SOURCE.read_text().rstrip("\n"),
        _RESUMER_END,
        f"if {found} && command -v python3 >/dev/null; then",
        *wait,
        f"  runuser -u {s.ssh_user} -- {command} || true",
        "fi",
    ]
