"""Why a subprocess ended, in one line: its exit code, or the signal that killed it, and whether the kernel's
OOM killer sent that signal where the kernel says so (the cgroup's `oom_kill` counter rose meanwhile); where it printed
a traceback, its last exception line instead (`failure_cause`). And the capped tail of its log that an `error` event
carries (`cap_tail`, workload/run/events.py)."""

from __future__ import annotations

import os
import re
import signal

_CGROUP_ROOT = "/sys/fs/cgroup"
# The last exception line of a Python traceback, e.g. "ValueError: …" or "jax.errors.JaxRuntimeError: …".
_EXCEPTION = re.compile(r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit|Interrupt)\b:?.*")
_TAIL_LINES = 20
_TAIL_CHARS = 300


def oom_kills(proc_self_cgroup: str = "/proc/self/cgroup", root: str = _CGROUP_ROOT) -> int | None:
    """How many processes the OOM killer has killed in this process's memory cgroup (v2 `memory.events`, v1
    `memory.oom_control`), or None where the kernel does not tell (no cgroup memory controller mounted)."""
    for counters in _counter_files(proc_self_cgroup, root):
        try:
            with open(counters, encoding="ascii") as f:
                for line in f:
                    name, _, value = line.partition(" ")
                    if name == "oom_kill" and value.strip().isdigit():
                        return int(value)
        except (OSError, UnicodeDecodeError):
            continue
    return None


def _counter_files(proc_self_cgroup: str, root: str) -> list[str]:
    try:
        with open(proc_self_cgroup, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError:
        lines = []
    files = []
    for line in lines:
        _, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if controllers == "":  # cgroup v2: one unified hierarchy
            files.append(os.path.join(root, path.lstrip("/"), "memory.events"))
        elif "memory" in controllers.split(","):
            files.append(os.path.join(root, "memory", path.lstrip("/"), "memory.oom_control"))
    # Inside a container the own path is often not visible: the mount's root is that container's cgroup.
    files += [os.path.join(root, "memory.events"), os.path.join(root, "memory", "memory.oom_control")]
    return files


def describe(returncode: int, oom_before: int | None = None, oom_after: int | None = None) -> str:
    """One line: "exited with code N", "killed by signal 15 (SIGTERM)", or for SIGKILL whether the OOM killer
    is known to have sent it."""
    if returncode >= 0:
        return f"exited with code {returncode}"
    number = -returncode
    try:
        name = signal.Signals(number).name
    except ValueError:
        name = "unknown signal"
    if number != signal.SIGKILL:
        return f"killed by signal {number} ({name})"
    if oom_before is not None and oom_after is not None and oom_after > oom_before:
        return "killed by the kernel's OOM killer (signal 9, SIGKILL): the host ran out of memory"
    return "killed by signal 9 (SIGKILL: the kernel's OOM killer sends this)"


def failure_cause(tail: list[str], returncode: int) -> str:
    """One line saying why a subprocess failed: its last exception line, else how it exited."""
    for line in reversed(tail):
        stripped = line.strip()
        if _EXCEPTION.match(stripped):
            return stripped[:_TAIL_CHARS]
    if returncode < 0:
        return describe(returncode)
    return f"exited with code {returncode} without an error message"


def cap_tail(lines: list[str]) -> list[str]:
    return [line.rstrip("\n")[:_TAIL_CHARS] for line in lines[-_TAIL_LINES:]]
