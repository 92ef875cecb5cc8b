"""This machine's processes, as the tests see them: the hosts the tests start are this machine, so what runs "on a
host" is here in /proc too."""

from __future__ import annotations

import os
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
