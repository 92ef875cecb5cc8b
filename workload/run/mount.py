"""Waiting for the data disk before keep: what is kept must land on it, not on the boot disk's empty mount point.
The run reaches keep long after the startup script mounted the disk at boot; this only makes sure it did."""

from __future__ import annotations

import os
import time

from workload.launch.proc import StepFailed

MOUNT_WAIT_S = 300  # a first boot formats the disk before mounting it (remote/pipeline/mount.py waits as long)


def require_mounted(path: str, wait_s: float | None = None) -> None:
    """Wait for `path` to be a mount point (up to `MOUNT_WAIT_S`), or fail the step with what to check."""
    wait_s = MOUNT_WAIT_S if wait_s is None else wait_s
    deadline = time.monotonic() + wait_s
    while not os.path.ismount(path):
        if time.monotonic() >= deadline:
            raise StepFailed(
                f"nothing is mounted at {path} after {wait_s:g} s, so the model would be kept on the boot disk and "
                "lost with the VM; check the startup script (sudo journalctl -u google-startup-scripts)"
            )
        time.sleep(1)
