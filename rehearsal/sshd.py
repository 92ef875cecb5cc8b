"""A throwaway OpenSSH server on loopback: the rehearsal's stand-in for the VM, and the remote tests' host.

Debian's /usr/sbin/sshd in the foreground with its own ed25519 host key and config in a private directory,
on a port picked free at start (other servers may run on this machine), logging in whoever owns the
authorised key file it is given. It dies with the thread that started it, so none outlives its user.
"""

from __future__ import annotations

import ctypes
import os
import shlex
import signal
import socket
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

SSHD = "/usr/sbin/sshd"
SFTP_SERVER = "/usr/lib/openssh/sftp-server"


def keygen(path: Path) -> Path:
    for stale in (path, Path(f"{path}.pub")):
        stale.unlink(missing_ok=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "tpu-sft-test", "-f", str(path)], check=True)
    return path


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when the starting thread ends (even killed), so no server outlives the
    tests. Start servers from the main thread."""
    ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM)  # 1 = PR_SET_PDEATHSIG


def free_port(address: str) -> int:
    with socket.socket() as s:
        s.bind((address, 0))
        return s.getsockname()[1]


@dataclass
class UserKey:
    private: Path
    authorized_keys: Path


def make_user_key(directory: Path) -> UserKey:
    directory.mkdir(parents=True, exist_ok=True)
    private = keygen(directory / "id_ed25519")
    authorized = directory / "authorized_keys"
    authorized.write_text(Path(f"{private}.pub").read_text())
    return UserKey(private, authorized)


class Sshd:
    """One sshd listening on `address`; `stop`/`start` keep the port, `kill_sessions` drops connections."""

    die_with_parent = staticmethod(_die_with_parent)  # run in the child before exec

    def __init__(
        self,
        directory: Path,
        user_key: UserKey,
        address: str = "127.0.0.1",
        *,
        sftp_log: Path | None = None,
        session_env: Mapping[str, str] | None = None,
    ):
        if not os.path.exists(SSHD):
            raise RuntimeError(f"{SSHD} is missing: run scripts/install-sshd (installs Debian's openssh-server)")
        self.dir, self.user_key, self.address = directory, user_key, address
        # Where OpenSSH's sftp-server logs each request it serves (paths and modes, never contents), for tests
        # that must tell which server received a file; a file the login user can write. None: internal-sftp.
        self.sftp_log = sftp_log
        # Variables every session gets (sshd's SetEnv): how the rehearsal's hosts reach a local Cloud Storage API.
        self.session_env = dict(session_env or {})
        directory.mkdir(parents=True, exist_ok=True)
        self.host_key = keygen(directory / "ssh_host_ed25519_key")
        self.log_path = directory / "sshd.log"
        self.port = 0
        self.proc: subprocess.Popen | None = None
        os.makedirs("/run/sshd", exist_ok=True)  # sshd's privilege-separation directory

    @property
    def known_hosts_line(self) -> str:
        kind, key = Path(f"{self.host_key}.pub").read_text().split()[:2]
        name = self.address if self.port == 22 else f"[{self.address}]:{self.port}"  # OpenSSH's own form
        return f"{name} {kind} {key}\n"

    def _write_config(self) -> Path:
        cfg = self.dir / "sshd_config"
        cfg.write_text(
            f"Port {self.port}\nListenAddress {self.address}\nHostKey {self.host_key}\nPidFile none\n"
            f"AuthorizedKeysFile {self.user_key.authorized_keys}\nStrictModes no\nUsePAM no\nMaxStartups 200\n"
            "PermitRootLogin prohibit-password\nPasswordAuthentication no\nKbdInteractiveAuthentication no\n"
            f"PubkeyAuthentication yes\nSubsystem sftp {self._sftp_server()}\nPrintMotd no\nLogLevel INFO\n"
            + (f"SetEnv {' '.join(f'{k}={v}' for k, v in self.session_env.items())}\n" if self.session_env else "")
        )
        return cfg

    def _sftp_server(self) -> str:
        if self.sftp_log is None:
            return "internal-sftp"
        # sshd runs an external subsystem through the login user's shell, which does the redirection.
        return f"{SFTP_SERVER} -e -l INFO 2>>{shlex.quote(str(self.sftp_log))}"

    def start(self, port: int | None = None) -> "Sshd":
        """Start on `port`, on the port it had before, or on a free one (retrying if another process wins it)."""
        if port or self.port:
            self.port = port or self.port
            if self._launch():
                return self
            raise RuntimeError(f"sshd would not start on {self.address}:{self.port}; see {self.log_path}")
        for _ in range(10):
            self.port = free_port(self.address)
            if self._launch():
                return self
        raise RuntimeError(f"sshd would not start on {self.address}; see {self.log_path}")

    def command(self, cfg: Path) -> list[str]:
        """The server in the foreground, logging to stderr; a subclass may run it inside something else."""
        return [SSHD, "-D", "-e", "-f", str(cfg)]

    def _launch(self) -> bool:
        cfg = self._write_config()
        log = open(self.log_path, "ab")
        start_size = self.log_path.stat().st_size
        self.proc = subprocess.Popen(self.command(cfg), stdout=log, stderr=log, preexec_fn=self.die_with_parent)
        log.close()
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            text = self.log_path.read_bytes()[start_size:].decode(errors="replace")
            if f"Server listening on {self.address} port {self.port}" in text:
                return True
            if self.proc.poll() is not None:
                return False
            time.sleep(0.01)
        self.proc.kill()
        self.proc.wait()
        return False

    def listener_pid(self) -> int | None:
        return None if self.proc is None else self.proc.pid

    def session_pids(self) -> list[int]:
        """The per-connection sshd processes (children of the listener)."""
        listener = self.listener_pid()
        if listener is None:
            return []
        pids = []
        for entry in os.listdir("/proc"):
            if entry.isdigit():
                try:
                    stat = Path(f"/proc/{entry}/stat").read_text()
                except OSError:
                    continue
                if int(stat.rsplit(")", 1)[1].split()[1]) == listener:
                    pids.append(int(entry))
        return pids

    def kill_sessions(self) -> int:
        pids = self.session_pids()
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        return len(pids)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.kill_sessions()
            self.proc.terminate()
            self.proc.wait(timeout=10)
        self.proc = None

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace")
