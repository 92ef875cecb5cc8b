"""The simulated VM's boot image: a Debian bookworm minbase root filesystem with what a Compute Engine image
has before its first boot, built once with debootstrap and cached as a tarball.

The real VM boots Google's TPU image (Ubuntu 22.04); this is Debian bookworm, the only archive this machine
reaches. Like a GCE image, it carries no SSH host keys (they are made at first boot) and no login user (the
guest agent makes it from the `ssh-keys` metadata); unlike bootstrap, it installs nothing for MaxText.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

SUITE = "bookworm"
MIRROR = "http://deb.debian.org/debian"
# What any GCE image has before first boot and the remote layer relies on: sshd (with its sftp server), sudo
# for the guest agent's users, curl and CA certificates, python3, ps (job state) and mkfs.ext4 (the startup
# script). Nothing that bootstrap installs (build-essential, cmake, ninja, uv, Python 3.12, MaxText).
PACKAGES = ("openssh-server", "sudo", "curl", "ca-certificates", "python3", "procps", "e2fsprogs")
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tpu-sft" / "rootfs"


class ImageError(RuntimeError):
    """The boot image could not be built; the message says which command failed and what to check."""


def image_key() -> str:
    recipe = "\n".join([SUITE, "minbase", MIRROR, *PACKAGES])
    return f"{SUITE}-minbase-{hashlib.sha256(recipe.encode()).hexdigest()[:12]}"


def cached_image(log=print) -> Path:
    """The pristine image tarball, built on first use (about a minute and 250 MB) and reused after."""
    CACHE.mkdir(parents=True, exist_ok=True)
    tarball = CACHE / f"{image_key()}.tar"
    with open(CACHE / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # two runs at once build it once
        if not tarball.exists():
            started = time.monotonic()
            log(f"fresh-vm: building the boot image {tarball.name} (debootstrap {SUITE} from {MIRROR}) …")
            _build(tarball)
            log(f"fresh-vm: boot image built in {time.monotonic() - started:.0f} s")
    return tarball


def unpack(tarball: Path, rootfs: Path) -> None:
    """A new boot disk: the pristine image, unpacked into an empty `rootfs`."""
    rootfs.mkdir(parents=True)
    _run(["tar", "-C", str(rootfs), "--numeric-owner", "-xpf", str(tarball)], "unpacking the boot image")


def _build(tarball: Path) -> None:
    if not shutil.which("debootstrap"):
        raise ImageError("debootstrap is missing. Fix: apt-get install -y debootstrap")
    with tempfile.TemporaryDirectory(prefix="tpu-sft-image-", dir=CACHE) as work:
        rootfs = Path(work) / "rootfs"
        _run(["debootstrap", "--variant=minbase", SUITE, str(rootfs), MIRROR], f"debootstrap {SUITE}")
        shutil.copy("/etc/resolv.conf", rootfs / "etc" / "resolv.conf")
        install = (
            "mount -t proc proc /proc && export DEBIAN_FRONTEND=noninteractive && apt-get update -q && "
            f"apt-get install -y -q --no-install-recommends {' '.join(PACKAGES)} && apt-get clean && "
            # A GCE image ships without host keys: they are made on the VM's first boot.
            "rm -f /etc/ssh/ssh_host_* && rm -rf /var/lib/apt/lists/*"
        )
        # Its own mount namespace: /proc inside the chroot goes away with it, even if the install fails.
        _run(
            ["unshare", "--mount", "--fork", "chroot", str(rootfs), "/bin/sh", "-c", install],
            "installing the image's packages",
        )
        (rootfs / "etc" / "resolv.conf").unlink()
        partial = tarball.with_suffix(".partial")
        _run(["tar", "-C", str(rootfs), "--numeric-owner", "-cpf", str(partial), "."], "packing the boot image")
        partial.rename(tarball)


def _run(argv: list[str], what: str) -> None:
    done = subprocess.run(argv, capture_output=True, text=True)
    if done.returncode != 0:
        tail = " | ".join((done.stderr or done.stdout).strip().splitlines()[-3:])
        raise ImageError(f"{what} failed (exit {done.returncode}): {tail}. Fix: check that {MIRROR} is reachable")
