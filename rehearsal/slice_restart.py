"""Each host's start-up after Google restarts the slice rehearsal's hosts (rehearsal/slice_hosts.py `restart`): the
resume step of the startup script the program declared for the slice's instance template (infra/resources/startup.py
`resume_lines`), run as the startup script runs it (as root, the resumer as the SSH user), inside the host's own
namespaces, with nothing from the laptop.

What differs from a slice's host, and why:
- the script's own paths: the resumer is written to the host's home (its boot disk) instead of /var/lib/tpu-sft,
  which is this machine's, and the program's `/home/<sshUser>` is the rehearsal login's home (root's is /root);
- the hosts' wait for each other (workload/run/slice_rejoin.py) is `wait_s`, passed on by the resumer's own flag;
- what reaches the bucket and the metadata server: on a host any process does; here the endpoints each host's SSH
  sessions get (its sshd's SetEnv), handed to the script, as the fresh-VM rehearsal hands its startup script.
The rest of the script (autostop: tests/slice/test_slice_autostop.py; sshd's keepalive) is not run here.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from infra.resources.startup import RESUMER_PATH
from rehearsal.slice_hosts import SliceHost
from workload.run.boot_resume import WAIT_FLAG

RESUMER_DIR = str(Path(RESUMER_PATH).parent)
BOOT_RESUME_LINE = "tpu-sft boot-resume:"  # workload/run/boot_resume.py's one line, in the script's output


def resume_step(startup_script: str, program_home: str, login_home: str, wait_s: float) -> str:
    """The declared script's resume step (its lines from the resumer's directory to the `fi` after it runs), as this
    rehearsal's hosts run it."""
    lines = startup_script.splitlines()
    first = lines.index(f"install -d -m 755 {RESUMER_DIR}")  # the resumer's, before autostop's same directory
    last = next(i for i in range(first, len(lines)) if lines[i] == "fi")
    here = f"{login_home}/.slice-host{RESUMER_DIR}"
    step = []
    for line in lines[first : last + 1]:
        line = line.replace(RESUMER_DIR, here).replace(f"{program_home}/", f"{login_home}/")
        if f"python3 {here}/" in line:
            line = line.replace(" || true", f" {WAIT_FLAG} {wait_s:g} || true")
        step.append(line)
    return "\n".join(step)


def run_resume_step(host: SliceHost, step: str, timeout_s: float = 120) -> str:
    """Run `step` in `host`'s namespaces as its startup script would, and return its output (the resumer's line)."""
    environment = [f"{k}={v}" for k, v in sorted(host.sshd.session_env.items())]
    done = subprocess.run(
        [
            "nsenter",
            f"--target={host.pid}",
            "--mount",
            "--uts",
            "--pid",
            "--",
            "env",
            "-i",
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",  # systemd's, as the script gets it
            *environment,
            "bash",
            "-c",
            f"set -euo pipefail\n{step}\n",
        ],
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    if done.returncode != 0 or BOOT_RESUME_LINE not in done.stdout:
        raise RuntimeError(f"worker {host.worker_id}'s resume step failed ({done.returncode}): {done.stderr.strip()}")
    return done.stdout.strip()
