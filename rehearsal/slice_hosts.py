"""The hosts of a simulated multi-host slice on this machine: N real OpenSSH servers, each with a home of its own.

The login's state (`<state_dir>`, its jobs) lives under its home directory, so hosts that shared this machine's
home would see each other's jobs. Each host is therefore an sshd (rehearsal/sshd.py) started inside its own
mount, UTS and PID namespaces (`unshare`, as root): a private directory bind-mounted over the login's home, its
own hostname (`worker-N`), and its own loopback address with port 22 (rehearsal/fresh_vm/address.py), so all
hosts share one port as a slice's workers do. `ssh` to each address lands in a separate home; from this machine
that home is `SliceHost.home`.

Each host also has its own metadata server stand-in (rehearsal/metadata_standin.py) on its own address, which the
host's sessions reach through GCE_METADATA_HOST: its `tpu-env` gives the host's TPU worker id, by default its place
in `addresses`; `worker_ids` gives others (a shuffled order: the host listed first need not be worker 0).

The sshd is the namespace's PID 1: killing `unshare` (--kill-child) ends every process of the host, detached
jobs included. `unshare` dies with the thread that started it (PR_SET_PDEATHSIG, SIGKILL: it ignores SIGTERM),
so a killed run leaves no host running; its homes stay (a re-run finds its jobs there, dead), and an address
whose port 22 is still taken is skipped.
"""

from __future__ import annotations

import os
import pwd
import shutil
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Mapping, Sequence

from rehearsal.fresh_vm.address import claim_address
from rehearsal.fresh_vm.machine import killed_with_parent
from rehearsal.metadata_standin import MetadataStandin, tpu_env
from rehearsal.sshd import Sshd, UserKey
from workload.run.boot_resume import BOOT_ID

# Own mounts (the home), hostname and processes; --kill-child: the namespace ends with unshare.
UNSHARE = ("unshare", "--mount", "--uts", "--pid", "--fork", "--kill-child", "--mount-proc", "--propagation", "private")
# Run as the namespace's first process: keep visible the $6 paths that follow (relative to the login's home, in
# which they lie), bind the private home, give the host its own /dev/shm (a VM's scratch), its own boot id (the
# kernel's is this machine's, and a restart makes a new one, as remote/ssh/jobs.py and boot_resume.py read it) and an
# /etc/hosts that resolves its own name (as a VM's does: gloo, JAX's CPU collectives, looks it up), name the host,
# become sshd.
_ENTER = (
    "home=$1 user_home=$2 name=$3 hosts=$4 boot_id=$5 n=$6; shift 6; "
    'while [ "$n" -gt 0 ]; do mkdir -p -- "$home/$1" && mount --bind -- "$user_home/$1" "$home/$1" || exit 1; '
    "shift; n=$((n - 1)); done; "
    'mount --rbind -- "$home" "$user_home" && mount -t tmpfs -o mode=1777 tmpfs /dev/shm && '
    f'mount --bind -- "$boot_id" {BOOT_ID} && '
    'mount --bind -- "$hosts" /etc/hosts && hostname -- "$name" && exec "$@"'
)
REPO = Path(__file__).resolve().parent.parent
# What the hosts run, wherever it lies (a checkout, pyenv's Python, under the home or not): this repository and
# the installation its MaxText venv's interpreter belongs to.
SHARED = (REPO, Path(os.path.realpath(REPO / ".maxtext-venv" / "bin" / "python")).parents[1])


class NamespacedSshd(Sshd):
    """An sshd in its own namespaces, seeing `home` as the login's home directory `user_home`."""

    die_with_parent = staticmethod(killed_with_parent)

    def __init__(
        self,
        directory: Path,
        user_key: UserKey,
        address: str,
        *,
        home: Path,
        user_home: str,
        hostname: str,
        session_env: Mapping[str, str] | None = None,
    ):
        super().__init__(directory, user_key, address, session_env=session_env)
        self.home, self.user_home, self.hostname = home, user_home, hostname

    def command(self, cfg: Path) -> list[str]:
        inside = [os.path.relpath(path, self.user_home) for path in SHARED]
        kept = [path for path in inside if path != os.curdir and not path.startswith(os.pardir)]
        hosts = self.dir / "hosts"
        hosts.write_text(Path("/etc/hosts").read_text() + f"{self.address}\t{self.hostname}\n")
        self.boot_id_file.write_text(f"{uuid.uuid4()}\n")  # every start of the namespace is a new boot
        return [
            *UNSHARE,
            "sh",
            "-c",
            _ENTER,
            "slice-host",
            str(self.home),
            self.user_home,
            self.hostname,
            str(hosts),
            str(self.boot_id_file),
            str(len(kept)),
            *kept,
            *super().command(cfg),
        ]

    @property
    def boot_id_file(self) -> Path:
        return self.dir / "boot_id"

    def listener_pid(self) -> int | None:
        """The sshd is the namespace's first process, unshare's child."""
        return None if self.proc is None else _first_child(self.proc.pid)

    def session_pids(self) -> list[int]:
        """The per-connection sshds only: as the namespace's PID 1, the listener is also the parent of every
        detached job of the host."""
        return [pid for pid in super().session_pids() if _command_name(pid).startswith("sshd")]

    def stop(self) -> None:
        """Kill the namespace: its sshd, every session and every job on this host."""
        self.wait_ended(self.kill())

    def kill(self) -> int | None:
        """SIGKILL the namespace, without waiting: every process of the host dies with its first, which it returns."""
        if self.proc is None:
            return None
        init = _first_child(self.proc.pid)
        self.proc.kill()
        return init

    def wait_ended(self, init: int | None) -> None:
        """Until the namespace `kill` ended is gone."""
        if self.proc is not None:
            self.proc.wait(timeout=30)
            _wait_ended(init)
        self.proc = None


@dataclass
class SliceHost:
    worker_id: int  # what its metadata's tpu-env says (TPU_WORKER_ID), whatever its place in `SliceHosts.addresses`
    sshd: NamespacedSshd
    home: Path  # the login's home on this host, as a path on this machine
    metadata: MetadataStandin  # its metadata server; kept when the host is recreated, as a group keeps its place

    @property
    def address(self) -> str:
        return self.sshd.address

    @property
    def hostname(self) -> str:
        return self.sshd.hostname

    @property
    def pid(self) -> int:
        """The host's first process (its sshd) as this machine sees it."""
        init = _first_child(self.sshd.proc.pid) if self.sshd.proc is not None else None
        if init is None:
            raise RuntimeError(f"worker {self.worker_id} is not running")
        return init

    def path(self, inside: str) -> Path:
        """A path as this host sees it (its own /dev/shm, its home), reached from this machine through /proc."""
        return Path(f"/proc/{self.pid}/root{inside}")

    @property
    def boot_id(self) -> str:
        return self.sshd.boot_id_file.read_text().strip()


class SliceHosts:
    """`count` hosts for `user` (who logs in with `user_key`) under `directory`; a context manager that starts them
    and stops them all. `worker_ids[i]`: the TPU_WORKER_ID in the tpu-env of the host at place i (default i).
    Worker N's home is `directory/worker-N/home` (kept across runs); all host keys are pinned in `known_hosts`."""

    def __init__(
        self,
        directory: Path,
        count: int,
        user: str,
        user_key: UserKey,
        *,
        session_env: Mapping[str, str] | None = None,
        worker_ids: Sequence[int] | None = None,
    ):
        if count < 1:
            raise ValueError("a slice needs at least one host")
        self.worker_ids = tuple(range(count) if worker_ids is None else worker_ids)
        if sorted(self.worker_ids) != list(range(count)):
            raise ValueError(f"worker ids {self.worker_ids} are not 0 to {count - 1} once each")
        self.directory, self.count, self.user, self.user_key = directory, count, user, user_key
        self.session_env = session_env
        self.known_hosts = directory / "known_hosts"
        self.hosts: list[SliceHost] = []
        self._locks: list[IO] = []

    def __enter__(self) -> "SliceHosts":
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.stop()

    def start(self) -> None:
        pins = []
        for worker_id in self.worker_ids:
            address, lock = claim_address()
            self._locks.append(lock)
            base = self.directory / f"worker-{worker_id}"
            metadata = MetadataStandin(address, {"tpu-env": tpu_env(worker_id, self.count)})
            try:
                host = self._boot(worker_id, address, base / "home", base / "sshd", metadata)
            except BaseException:
                metadata.stop()
                raise
            self.hosts.append(host)
            pins.append(host.sshd.known_hosts_line)
        self.known_hosts.write_text("".join(pins))  # rewritten: a leftover run's keys are not these

    def recreate(self, place: int) -> SliceHost:
        """Replace the host at `place` as its managed instance group recreates one: the same name, address and
        metadata, a new machine (nothing of the old one's processes or home) with a new host key. known_hosts keeps
        the old key: what a client pinned is the client's business."""
        old = self.hosts[place]
        old.sshd.stop()
        shutil.rmtree(old.home)
        generation = len(list(old.home.parent.glob("sshd*")))
        self.hosts[place] = self._boot(
            old.worker_id, old.address, old.home, old.home.parent / f"sshd-{generation}", old.metadata
        )
        return self.hosts[place]

    def restart(self, down: Sequence[int] = ()) -> None:
        """Google's restart of the slice ("Failure recovery of TPU instances", Cloud TPU docs: a multi-host slice
        "require[s] all instances in the slice to be recovered or rescheduled together"): every host's processes
        killed at once, then each host back as the same machine (its home, the boot disk; its address, host key and
        metadata) with an empty /dev/shm and a new boot id. The hosts whose worker ids are in `down` do not come back
        (`come_back` boots one later). The startup script is not run here: rehearsal/slice_restart.py runs its
        resume step. Not enforced: how long Google takes, and the move to other hardware (it is this machine again)."""
        killed = [(host, host.sshd.kill()) for host in self.hosts]  # all first: no host outlives another's death
        for host, init in killed:
            host.sshd.wait_ended(init)
        for host in self.hosts:
            if host.worker_id not in down:
                host.sshd.start(22)

    def come_back(self, worker_id: int) -> SliceHost:
        """A host that stayed down in `restart` boots now, late."""
        host = self.by_worker_id(worker_id)
        host.sshd.start(22)
        return host

    def _boot(self, worker_id: int, address: str, home: Path, sshd_dir: Path, metadata: MetadataStandin) -> SliceHost:
        login = pwd.getpwnam(self.user)
        home.mkdir(parents=True, exist_ok=True)
        os.chown(home, login.pw_uid, login.pw_gid)
        home.chmod(0o755)
        sshd = NamespacedSshd(
            sshd_dir,
            self.user_key,
            address,
            home=home,
            user_home=login.pw_dir,
            hostname=f"worker-{worker_id}",
            session_env={**(self.session_env or {}), "GCE_METADATA_HOST": metadata.host},
        )
        try:
            sshd.start(22)
        except BaseException:
            sshd.stop()
            raise
        return SliceHost(worker_id, sshd, home, metadata)

    def stop(self) -> None:
        for host in self.hosts:
            host.sshd.stop()
            host.metadata.stop()
        for lock in self._locks:
            lock.close()
        self.hosts, self._locks = [], []

    @property
    def addresses(self) -> tuple[str, ...]:
        """What a target lists as its host and workers, in place order (as the program lists a group's hosts by
        instance name): worker order only where `worker_ids` is the default."""
        return tuple(host.address for host in self.hosts)

    def by_worker_id(self, worker_id: int) -> SliceHost:
        """The host whose tpu-env says `worker_id`."""
        return next(host for host in self.hosts if host.worker_id == worker_id)


def _command_name(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:  # ended
        return ""


def _first_child(pid: int) -> int | None:
    """The namespace's PID 1 as this machine sees it: unshare's only child."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        return None
    return int(children[0]) if children else None


def _wait_ended(pid: int | None, timeout_s: float = 30.0) -> None:
    """Until the namespace's PID 1 is a zombie or gone: the kernel makes it a zombie only once every other process
    of its namespace has died (who reaps it, and when, is this machine's init's business)."""
    deadline = time.monotonic() + timeout_s
    while pid is not None:
        try:
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            return
        if state in ("Z", "X"):
            return
        if time.monotonic() > deadline:
            raise RuntimeError(f"slice host process {pid} is still alive {timeout_s:g} s after it was killed")
        time.sleep(0.02)
