"""The remote-layer tests' and bench's test bed: real OpenSSH servers on loopback (rehearsal/sshd.py), the
unprivileged user they log in as, an ssh-agent, a TCP proxy that can blackhole, and a poll-with-deadline helper."""

from __future__ import annotations

import contextlib
import fcntl
import pwd
import select
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

from rehearsal.sshd import SSHD, Sshd, UserKey, free_port, keygen, make_user_key  # noqa: F401  (re-exported)

REMOTE_USER = "tpusft-test"


def ensure_remote_user() -> pwd.struct_passwd:
    """An unprivileged login with /bin/sh as its shell, created if absent (needs root). Test processes running
    side by side (pytest-xdist) take turns: useradd and usermod refuse while another holds /etc/passwd."""
    with open("/run/tpu-sft-test-user.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            pwd.getpwnam(REMOTE_USER)
        except KeyError:
            subprocess.run(["useradd", "--create-home", "--shell", "/bin/sh", REMOTE_USER], check=True)
        # Without PAM, sshd refuses accounts whose password field is locked ("!"); "*" is no password, unlocked.
        subprocess.run(["usermod", "--password", "*", REMOTE_USER], check=True)
    return pwd.getpwnam(REMOTE_USER)


class TcpProxy:
    """A loopback TCP relay to `upstream` whose link can be cut: `blackhole()` freezes every open connection and
    accepts new ones without ever answering (a dead link, not a refused one); `forward()` relays new ones again."""

    def __init__(self, upstream: tuple[str, int], address: str = "127.0.0.1", port: int = 0):
        self.upstream = upstream
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((address, port))
        self.listener.listen(64)
        self.address, self.port = self.listener.getsockname()
        self.mode = "forward"
        self.generation = 0  # bumped by blackhole(): relays of older generations stop for good
        self.sockets: list[socket.socket] = []
        self.closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def blackhole(self) -> None:
        self.mode = "blackhole"
        self.generation += 1

    def forward(self) -> None:
        self.mode = "forward"

    def _accept(self) -> None:
        while not self.closed:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.sockets.append(client)
            if self.mode == "forward":
                threading.Thread(target=self._relay, args=(client, self.generation), daemon=True).start()

    def _relay(self, client: socket.socket, generation: int) -> None:
        try:
            upstream = socket.create_connection(self.upstream)
        except OSError:
            client.close()
            return
        self.sockets.append(upstream)
        peers = {client: upstream, upstream: client}
        while not self.closed and self.generation == generation:
            readable, _, _ = select.select(list(peers), [], [], 0.05)
            for s in readable:
                try:
                    data = s.recv(65536)
                    if not data:
                        raise OSError("closed")
                    peers[s].sendall(data)
                except OSError:
                    client.close()
                    upstream.close()
                    return

    def close(self) -> None:
        self.closed = True
        self.listener.close()
        for s in self.sockets:
            s.close()


@contextlib.contextmanager
def ssh_agent(socket_path: Path, timeout: float = 300.0) -> Iterator[subprocess.Popen]:
    """An ssh-agent that listens on `socket_path` once entered. In the foreground (`-D`) it prints its
    `SSH_AUTH_SOCK=…` line only after `unix_listener` has bound and listened (OpenSSH ssh-agent.c, main), so that
    line is the handshake: the socket file alone exists before the agent listens, and a clock loses under load."""
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(socket_path)], stdout=subprocess.PIPE, text=True)
    try:
        assert agent.stdout is not None
        ready, _, _ = select.select([agent.stdout], [], [], timeout)
        line = agent.stdout.readline() if ready else ""
        if not line.startswith(f"SSH_AUTH_SOCK={socket_path};"):
            raise AssertionError(
                f"ssh-agent did not say it listens on {socket_path} within {timeout} s "
                f"(it printed {line!r}; exit status {agent.poll()})"
            )
        yield agent
    finally:
        agent.terminate()
        agent.wait()


def wait_until(predicate, timeout: float = 300.0, what: str = "condition"):
    """Poll `predicate` until it returns something truthy, or fail after `timeout` s: no fixed sleeps in tests. The
    bound only ends a wait that has failed, so it is far beyond what a loaded machine takes (a 60 s one was lost)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout} s waiting for {what}")


def held_by_another_thread(lock) -> threading.Event:
    """Hold `lock` from another thread until the returned event is set: what Ctrl-C leaves behind when it strikes
    the main thread inside paramiko between taking a transport's send lock and releasing it."""
    taken, done = threading.Event(), threading.Event()

    def hold() -> None:
        with lock:
            taken.set()
            done.wait()

    threading.Thread(target=hold, daemon=True).start()
    assert taken.wait(60)
    return done
