"""This machine's processes, as the tests see them: the hosts the tests start are this machine, so what runs "on a
host" is here in /proc too."""

from __future__ import annotations

import os
import subprocess
import threading
import time
from collections.abc import Callable


def outliving(belongs: Callable[[dict], bool], timeout_s: float = 30.0) -> list[dict]:
    """The processes that `belongs` picks still there after `timeout_s`: SIGKILL is delivered asynchronously, and a
    process whose gigabytes of memory the kernel is still freeing is there, without a command line, for seconds
    under load."""
    deadline = time.monotonic() + timeout_s
    while (left := [p for p in processes() if belongs(p)]) and time.monotonic() < deadline:
        time.sleep(0.2)
    return left


def processes() -> list[dict]:
    """Every live (not zombie) process: pid, ppid, session, cmdline."""
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                state, ppid, _, session = f.read().rsplit(")", 1)[1].split()[:4]
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                cmdline = f.read().replace(b"\0", b" ").decode(errors="replace").strip()
        except (OSError, ValueError):
            continue
        if state != "Z":
            found.append({"pid": int(entry), "ppid": int(ppid), "session": int(session), "cmdline": cmdline})
    return found


class Watched:
    """A started command (rehearsal/run.py `start`) whose stdout the test reads line by line, up to the line it waits
    for, while a thread reads its stderr, so that a full pipe never stalls it."""

    def __init__(self, proc: subprocess.Popen):
        assert proc.stdout is not None and proc.stderr is not None
        self.proc = proc
        self.seen: list[str] = []
        self.drained: list[str] = []
        stderr = proc.stderr
        threading.Thread(target=lambda: self.drained.extend(stderr), daemon=True).start()

    def read_until(self, prefix: str) -> None:
        """Read stdout up to and including its first line starting with `prefix` (or to its end)."""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.seen.append(line)
            if line.startswith(prefix):
                return

    def rest(self) -> None:
        """Read stdout to its end."""
        assert self.proc.stdout is not None
        self.seen.extend(self.proc.stdout)

    @property
    def stdout(self) -> str:
        return "".join(self.seen)

    @property
    def stderr(self) -> str:
        return "".join(self.drained)
