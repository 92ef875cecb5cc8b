"""The ProxyCommand a target reaches its host through (IAP: `gcloud compute start-iap-tunnel …`), with its
errors kept.

paramiko's own `ProxyCommand` pipes the command's stderr and never reads it, and when the command exits it
spins until the banner timeout: gcloud's "no active account" or "not authorized" became, after every retry,
"Error reading SSH protocol banner". Here stderr goes to a file that errors quote, an exited command fails
the connection at once, and `check_gcloud` finds a missing or logged-out gcloud before the first connection.
"""

from __future__ import annotations

import os
import select
import shlex
import shutil
import socket
import subprocess
import tempfile
import threading
import time
from typing import IO, cast

import paramiko
from paramiko.ssh_exception import ProxyCommandFailure

from remote.ssh.errors import TargetError

AUTH_CHECK = ("auth", "list", "--filter=status:ACTIVE", "--format=value(account)")
_TAIL_BYTES = 4096


class GatewayProcess(paramiko.ProxyCommand):
    """paramiko's ProxyCommand with the command's stderr kept in a file, and its exit noticed at once."""

    def __init__(self, command_line: str):  # replaces the parent's Popen (stderr=PIPE, never read)
        self.cmd = shlex.split(command_line)
        self.stderr_file = tempfile.TemporaryFile()
        self.process = subprocess.Popen(
            self.cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.stderr_file, bufsize=0
        )
        self.to_tunnel = cast(IO[bytes], self.process.stdin)  # both PIPEs: never None
        self.from_tunnel = cast(IO[bytes], self.process.stdout)
        self.timeout = None
        self.said_at_close = ""
        # paramiko's transport thread and the caller may both close the proxy, and read its stderr, at once.
        self._stderr_lock = threading.Lock()

    def send(self, content: bytes) -> int:
        try:
            self.to_tunnel.write(content)
        except OSError:  # it has exited: say why, not "Broken pipe"
            raise ProxyCommandFailure(self.cmd[0], self._why_it_ended()) from None
        return len(content)

    def recv(self, size: int) -> bytes:
        buffer = b""
        start = time.monotonic()
        while len(buffer) < size:
            wait = None
            if self.timeout is not None:
                wait = self.timeout - (time.monotonic() - start)
                if wait <= 0:
                    if buffer:
                        return buffer
                    raise socket.timeout()
            if select.select([self.from_tunnel], [], [], wait)[0]:
                chunk = os.read(self.from_tunnel.fileno(), size - len(buffer))
                if not chunk:  # end of its output: the tunnel is gone, whatever paramiko waits for
                    if buffer:
                        return buffer
                    raise ProxyCommandFailure(self.cmd[0], self._why_it_ended())
                buffer += chunk
        return buffer

    def _why_it_ended(self) -> str:
        try:
            code = self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            code = None
        said = self.stderr_tail() or "nothing on stderr"
        return f"{'closed the tunnel' if code is None else f'exited {code}'}: {said}"

    def stderr_tail(self) -> str:
        """The command's last line on stderr (gcloud's own error), or "". Still there once closed: paramiko's
        transport thread may close the proxy before the connection's error is built."""
        with self._stderr_lock:
            if self.stderr_file.closed:
                return self.said_at_close
            return self._read_tail()

    def _read_tail(self) -> str:
        self.stderr_file.seek(0, os.SEEK_END)
        size = self.stderr_file.tell()
        self.stderr_file.seek(max(0, size - _TAIL_BYTES))
        return _last_line(self.stderr_file.read().decode(errors="replace"))

    def close(self) -> None:
        if self.process.poll() is None:
            super().close()
        with self._stderr_lock:
            if not self.stderr_file.closed:
                self.said_at_close = self._read_tail()
                self.stderr_file.close()


def check_gcloud(gateway: str | None) -> None:
    """Before a first connection through gcloud: is it installed, and logged in (`gcloud auth login`, which the
    IAP tunnel uses; application-default credentials are a separate login)? Raises a one-line `TargetError`."""
    argv = shlex.split(gateway) if gateway else []
    if not argv or os.path.basename(argv[0]) != "gcloud":
        return
    gcloud = shutil.which(argv[0])
    if gcloud is None:
        raise TargetError(
            "gateway",
            "gcloud is not on PATH, and the IAP tunnel needs it",
            "install the Google Cloud CLI (https://cloud.google.com/sdk/docs/install) or add it to PATH",
        )
    try:
        listed = subprocess.run(
            [gcloud, *AUTH_CHECK], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        raise TargetError(
            "gateway",
            "`gcloud auth list` did not answer within 60 s",
            "check that `gcloud auth list` works in this shell",
        ) from None
    if listed.returncode != 0 or not listed.stdout.strip():
        said = _last_line(listed.stderr)
        raise TargetError(
            "gateway",
            "gcloud has no active account" + (f" ({said})" if said else ""),
            "run `gcloud auth login` (the IAP tunnel uses it, not application-default credentials)",
        )


def _last_line(text: str) -> str:
    lines = [line.strip() for line in (text or "").splitlines() if line.strip()]
    return lines[-1] if lines else ""
