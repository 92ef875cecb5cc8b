"""Waiting for the data disk: what is kept must land on it, not on the boot disk's empty mount point."""

from __future__ import annotations

import shlex

from remote.ssh.connection import Connection, run
from remote.ssh.errors import RemoteError

MOUNT_WAIT_S = 300  # a first boot formats the disk before mounting it


def require_mounted(conn: Connection, path: str, wait_s: float) -> None:
    """Wait for the startup script to mount `path`, or stop with what to check (a model kept on the boot disk
    would be lost with the VM)."""
    polls = max(1, int(wait_s))
    script = f"i=0; until mountpoint -q {shlex.quote(path)}; do [ $i -ge {polls} ] && exit 1; sleep 1; i=$((i+1)); done"
    if run(conn, script, warn=True, timeout=wait_s + conn.target.command_timeout).exited != 0:
        raise RemoteError(
            f"{conn.host}: nothing is mounted at {path} after {wait_s:g} s, so the model would be kept on the "
            "boot disk and lost with the VM; check the startup script (sudo journalctl -u google-startup-scripts)"
        )
