"""The data disk: a sparse file attached as a loop device, which outlives every VM that uses it.

The VM sees the loop device as /dev/disk/by-id/google-<device name> (machine.py makes the node); what
formats and mounts it is the program's own startup script, not this module.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

SIMULATED_SIZE_GB = 8  # mkfs with lazy_itable_init=0 writes every inode table: 100 GB would write 1.6 GB


@dataclass
class LoopDisk:
    image: Path
    size_gb: int
    device: str | None = None

    def attach(self) -> str:
        """Attach the disk (creating its sparse file the first time); returns /dev/loopN."""
        if not self.image.exists():
            self.image.parent.mkdir(parents=True, exist_ok=True)
            with open(self.image, "wb") as f:
                f.truncate(self.size_gb * 1024**3)
        detach_stale(self.image)
        self.device = _run(["losetup", "--find", "--show", str(self.image)]).strip()
        return self.device

    def numbers(self) -> tuple[int, int]:
        """The device's (major, minor), for the node the VM sees."""
        assert self.device, "attach the disk first"
        rdev = os.stat(self.device).st_rdev
        return os.major(rdev), os.minor(rdev)

    def filesystem_uuid(self) -> str | None:
        """The ext4 UUID on the disk, or None while it is blank (what the startup script's blkid asks)."""
        assert self.device, "attach the disk first"
        done = subprocess.run(["blkid", "-p", "-s", "UUID", "-o", "value", self.device], capture_output=True, text=True)
        return done.stdout.strip() or None

    def detach(self) -> None:
        if self.device:
            subprocess.run(["losetup", "-d", self.device], capture_output=True)
            self.device = None


def detach_stale(image: Path) -> None:
    """Loop devices a killed run left on `image`: a disk is attached to one VM at a time."""
    for line in _run(["losetup", "-j", str(image)]).splitlines():
        subprocess.run(["losetup", "-d", line.split(":", 1)[0]], capture_output=True)


def _run(argv: list[str]) -> str:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(
            f"{' '.join(argv)} failed: {done.stderr.strip()}. Fix: run as root on a machine with loop devices"
        )
    return done.stdout
