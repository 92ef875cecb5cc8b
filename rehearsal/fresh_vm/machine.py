"""A simulated Compute Engine VM: `create` returns at once, like the API, while the VM boots on its own.

The VM is a chroot into a new boot disk (the cached image, unpacked) run in its own mount, PID and UTS
namespaces, with its own hostname, its own /dev (the data disk's node at /dev/disk/by-id/google-<device>,
a fresh /dev/shm), and guest.py as PID 1. `delete` kills the namespace — every process and mount in it
goes with it — and discards the boot disk; the data disk only detaches and is kept for the next VM.
"""

from __future__ import annotations

import ctypes
import json
import shlex
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

from rehearsal.fresh_vm.declared import DeclaredVm
from rehearsal.fresh_vm.disk import LoopDisk
from rehearsal.fresh_vm.image import unpack

GUEST = Path(__file__).with_name("guest.py")
SHM_SIZE = "4g"
# The VM's own mounts, processes and hostname; killed with its PID 1 (--kill-child) when unshare dies.
UNSHARE = ("unshare", "--mount", "--pid", "--uts", "--fork", "--kill-child")
DETACH_WAIT_S = 30
# On the boot disk: the environment guest.py gives the startup script, beside the image's own (substitutions.py
# writes what a real VM's metadata server would give its processes).
BOOT_ENV = "/etc/tpu-sft-sim-boot.env"


@dataclass(frozen=True)
class Timeline:
    sshd_delay_s: float = 10.0  # a new GCE VM answers SSH some seconds after `create` returned
    user_delay_s: float = 12.0  # the guest agent makes the login user some seconds after sshd answers


GCE_LIKE = Timeline()


@dataclass
class Boot:
    """One boot of the VM, as seen from outside: its console and the data disk before and after."""

    number: int
    created_at: float
    console: Path
    disk_uuid_before: str | None
    disk_uuid_after: str | None = None
    deleted_at: float | None = None
    init_pid: int | None = None  # the VM's PID 1 as this machine saw it

    def events(self) -> list[tuple[float, str, str]]:
        """(unix time, event, detail) for each console line, in order."""
        found = []
        for line in self.console.read_text(errors="replace").splitlines():
            parts = line.split(" ", 2)
            if len(parts) >= 2 and _is_time(parts[0]):
                found.append((float(parts[0]), parts[1], parts[2] if len(parts) > 2 else ""))
        return found

    def first(self, name: str, contains: str = "") -> tuple[float, str] | None:
        return next(((t, d) for t, e, d in self.events() if e == name and contains in d), None)


@dataclass
class FreshVm:
    declared: DeclaredVm
    address: str
    disk: LoopDisk
    directory: Path  # console logs here; boot disks under `boot_disks`
    boot_disks: Path
    provisions: list[Callable[[Path], None]] = field(default_factory=list)  # applied to each new boot disk
    timeline: Timeline = GCE_LIKE
    boots: list[Boot] = field(default_factory=list)
    _proc: subprocess.Popen | None = None
    _rootfs: Path | None = None  # the boot disk of the running VM, kept across a restart
    _discarding: list[subprocess.Popen] = field(default_factory=list)

    def create(self, image: Path) -> Boot:
        """A new boot disk from `image`, the data disk attached, and the VM started; returns at once."""
        if self._proc is not None:
            raise RuntimeError("the VM is running: delete it before creating it again")
        number = len(self.boots) + 1
        rootfs = self.boot_disks / f"boot-{number}"
        discard(rootfs)
        unpack(image, rootfs)
        for provision in self.provisions:
            provision(rootfs)
        self.disk.attach()
        return self._boot(rootfs)

    def restart(self) -> Boot:
        """Google's own restart of a TPU VM ("Failure recovery of TPU instances", Cloud TPU docs: Compute Engine
        "automatically recovers TPU instances and slices by restarting them on healthy hardware" after host
        maintenance, a host error or a crash): the same VM with the same boot and data disks, whose processes died
        with the old boot, an empty /dev/shm, a new boot id, and the startup script run again; nothing from the
        laptop. Not enforced: the move to other hardware (it is this machine again), how long Google takes, the
        maintenance events Google announces first, and a slice's hosts restarting together (rehearsal/slice.py)."""
        if self._proc is None or self._rootfs is None:
            raise RuntimeError("the VM is not running: a restart needs a running VM")
        rootfs = self._rootfs
        self._kill()
        return self._boot(rootfs)

    def _boot(self, rootfs: Path) -> Boot:
        """Start the VM from `rootfs` with the data disk attached: a new boot, returned at once."""
        number = len(self.boots) + 1
        self._rootfs = rootfs
        sim = self.directory / f"boot-{number}-sim"
        discard(sim)
        sim.mkdir(parents=True)
        shutil.copy(GUEST, sim / "guest.py")
        (sim / "startup-script").write_text(self.declared.startup_script)
        (sim / "startup-script").chmod(0o755)
        (sim / "boot.json").write_text(
            json.dumps(
                {
                    "boot": number,
                    "hostname": self.declared.name,
                    "address": self.address,
                    "ssh_keys": self.declared.ssh_keys,
                    "sshd_delay_s": self.timeline.sshd_delay_s,
                    "user_delay_s": self.timeline.user_delay_s,
                    "boot_env": BOOT_ENV,
                }
            )
        )
        (sim / "hypervisor.sh").write_text(_hypervisor_script(rootfs, sim, self.declared, self.disk.numbers()))
        console = self.directory / f"boot-{number}-console.log"
        boot = Boot(number, time.time(), console, self.disk.filesystem_uuid())
        with open(console, "w") as out:
            self._proc = subprocess.Popen(
                [*UNSHARE, "/bin/sh", str(sim / "hypervisor.sh")],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                preexec_fn=killed_with_parent,
            )
        self.boots.append(boot)
        return boot

    @property
    def pid(self) -> int:
        """The VM's PID 1 as this machine sees it: /proc/<pid>/root is the VM's own view of its files."""
        init = self._init_pid()
        if init is None:
            raise RuntimeError("the VM is not running")
        return init

    def _init_pid(self) -> int | None:
        if self._proc is None:
            return None
        try:
            children = Path(f"/proc/{self._proc.pid}/task/{self._proc.pid}/children").read_text().split()
        except OSError:
            return None
        return int(children[0]) if children else None

    def wait_for(self, name: str, timeout_s: float, contains: str = "") -> tuple[float, str]:
        """Wait until the console shows `name`; raises if the VM stops first or it does not come in time."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            found = self.boots[-1].first(name, contains)
            if found:
                return found
            if self._proc is None or self._proc.poll() is not None:
                raise RuntimeError(f"the VM stopped before {name}; see {self.boots[-1].console}")
            time.sleep(0.2)
        raise TimeoutError(f"no {name} on the VM's console within {timeout_s:g} s; see {self.boots[-1].console}")

    def delete(self) -> None:
        """Kill the VM, discard its boot disk, detach (and keep) the data disk. Safe to call again."""
        self._kill()
        self.disk.detach()
        # As Google frees a deleted VM's boot disk after the VM is gone: deleting its ~100,000 files takes
        # minutes of this machine's disk, and nothing waits for it but `wait_discarded`.
        if self._rootfs is not None and self._rootfs.exists():
            self._discarding.append(_discard_in_background(self._rootfs))
        self._rootfs = None
        for boot in self.boots:
            discard(self.directory / f"boot-{boot.number}-sim")

    def _kill(self) -> None:
        """End the running boot: every process and mount of the VM goes; the disks stay attached."""
        if self._proc is None:
            return
        boot = self.boots[-1]
        init = boot.init_pid = self._init_pid()
        # unshare ignores SIGTERM; killed, its --kill-child takes the VM's PID 1, and with it the namespace.
        self._proc.kill()
        self._proc.wait(timeout=30)
        self._proc = None
        _wait_gone(init)
        boot.deleted_at = time.time()
        _wait_unmounted(self.disk)
        boot.disk_uuid_after = self.disk.filesystem_uuid()

    def wait_discarded(self) -> None:
        """Until every deleted boot disk is gone from this machine."""
        while self._discarding:
            self._discarding.pop().wait()


_CHAR_DEVICES = [("null", 1, 3), ("zero", 1, 5), ("full", 1, 7), ("random", 1, 8), ("urandom", 1, 9), ("tty", 5, 0)]


def _hypervisor_script(rootfs: Path, sim: Path, declared: DeclaredVm, numbers: tuple[int, int]) -> str:
    """Run as PID 1 of the new namespaces, before the chroot: the VM's own /proc, /dev, /run and hostname."""
    r, major, minor = shlex.quote(str(rootfs)), *numbers
    nodes = "\n".join(f"mknod -m 666 {r}/dev/{name} c {a} {b}" for name, a, b in _CHAR_DEVICES)
    device = shlex.quote(f"google-{declared.data_disk_device}")
    return f"""set -eu
mount -t proc proc {r}/proc
cat /proc/sys/kernel/random/uuid > {shlex.quote(str(sim))}/boot_id
mount --bind {shlex.quote(str(sim))}/boot_id {r}/proc/sys/kernel/random/boot_id
mount -t sysfs sysfs {r}/sys
mount -t tmpfs -o mode=755,size=1m dev {r}/dev
{nodes}
mkdir -m 755 {r}/dev/pts {r}/dev/disk {r}/dev/disk/by-id
mkdir -m 1777 {r}/dev/shm
mount -t devpts -o newinstance,ptmxmode=0666,mode=620 devpts {r}/dev/pts
ln -s pts/ptmx {r}/dev/ptmx
ln -s /proc/self/fd {r}/dev/fd
mount -t tmpfs -o mode=1777,size={SHM_SIZE} shm {r}/dev/shm
mknod -m 660 {r}/dev/sdb b {major} {minor}
ln -s ../../sdb {r}/dev/disk/by-id/{device}
mount -t tmpfs -o mode=755 run {r}/run
cp -a {shlex.quote(str(sim))} {r}/run/tpu-sft-sim
cp /etc/resolv.conf {r}/etc/resolv.conf
hostname {shlex.quote(declared.name)}
exec chroot {r} /usr/bin/python3 -u /run/tpu-sft-sim/guest.py
"""


def discard(path: Path) -> None:
    """Delete a boot disk's tree: rm is many times faster than shutil.rmtree on its 100,000 hard links, and
    --one-file-system never follows a mount into this machine's own files."""
    subprocess.run(_RM + [str(path)], check=True)


def _discard_in_background(path: Path) -> subprocess.Popen:
    """`discard`, started: the tree is renamed away first, so its name is free at once."""
    doomed = path.with_name(f".discarded-{path.name}-{time.monotonic_ns()}")
    path.rename(doomed)
    return subprocess.Popen(_RM + [str(doomed)], stdin=subprocess.DEVNULL)


_RM = ["rm", "-rf", "--one-file-system", "--"]


def killed_with_parent() -> None:
    """In unshare before exec: SIGKILL when the process that created the VM ends, however it ends (unshare
    ignores SIGTERM), so that no VM outlives its rehearsal."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG


def _wait_gone(pid: int | None) -> None:
    deadline = time.monotonic() + DETACH_WAIT_S
    while pid is not None and Path(f"/proc/{pid}").exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"the VM's PID 1 ({pid}) is still alive {DETACH_WAIT_S} s after it was killed")
        time.sleep(0.05)


def _wait_unmounted(disk: LoopDisk) -> None:
    """The namespace's mounts go a moment after its last process: wait until the kernel has let go of the
    disk's ext4 (its /sys/fs/ext4/<device> entry), or the next VM would mount it while it is still mounted."""
    mounted = Path("/sys/fs/ext4") / Path(disk.device or "none").name
    deadline = time.monotonic() + DETACH_WAIT_S
    while mounted.exists():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{disk.device} is still mounted {DETACH_WAIT_S} s after the VM was deleted")
        time.sleep(0.1)


def _is_time(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False
