"""The remote-layer tests' and bench's test bed: real OpenSSH servers on loopback (rehearsal/sshd.py), the
unprivileged user they log in as, a TCP proxy that can blackhole, and a poll-with-deadline helper."""

from __future__ import annotations

import fcntl
import pwd
import select
import socket
import subprocess
import threading
import time

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
    assert taken.wait(5)
    return done
