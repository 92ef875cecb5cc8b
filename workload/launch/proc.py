"""Runs one MaxText subprocess: its merged output goes line by line to a full raw log (token scrubbed) and
to a callback; a non-zero exit becomes `StepFailed` with a one-line cause and the log's tail.

The step ends when the subprocess itself ends, whatever its children do. MaxText's children (a
`multiprocessing` spawn worker and its `resource_tracker`) survive a SIGKILL of the trainer and keep its
stdout pipe open; waiting for the pipe's EOF would wait forever. So the output is read in a thread, the
runner waits on the process, and the runner is a child subreaper: the orphans of a dead subprocess become
its children, and it kills and reaps them. The subprocess stays in the runner's process group, so whoever
kills that group (a cancelled job, a test) still reaches all of them.
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
from collections import deque
from typing import IO, Callable, Mapping

from workload.launch import exit_reason

_PR_SET_PDEATHSIG = 1
_PR_SET_CHILD_SUBREAPER = 36
# After the process and its orphans have ended, the pipe closes at once; only a process that inherited it some
# other way could still hold it: its remaining output is not worth a hang.
_DRAIN_S = 10.0


class StepFailed(Exception):
    def __init__(self, cause: str, log: str | None = None, tail: list[str] | None = None):
        super().__init__(cause)
        self.cause, self.log, self.tail = cause, log, tail or []


def _die_with_parent() -> None:
    """A MaxText child must not outlive the runner: an orphaned trainer keeps holding the TPU
    ("TPU already in use") and keeps writing checkpoints under a run that a re-run resumes."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def adopt_orphans(adopt: bool) -> None:
    """While set, orphans of this process's descendants become its children (not init's), so that they can be
    ended."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, int(adopt))


def end_adopted_children(keep: set[int]) -> None:
    """Kill and reap every child of this process but those in `keep` (its children before the step), until none
    is left: a killed child's own children are adopted in turn."""
    for _ in range(10):
        children = [pid for pid in _children(os.getpid()) if pid not in keep]
        if not children:
            return
        for pid in children:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        for pid in children:
            try:
                os.waitpid(pid, 0)
            except ChildProcessError:
                pass


def _children(parent: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", encoding="ascii", errors="replace") as f:
                    ppid = int(f.read().rsplit(")", 1)[1].split()[1])
            except (OSError, ValueError, IndexError):
                continue
            if ppid == parent:
                found.append(int(entry))
    return found


def run_logged(
    argv: tuple[str, ...] | list[str],
    *,
    env: Mapping[str, str],
    log_path: str,
    cwd: str,
    on_line: Callable[[str], None],
    scrub: Callable[[str], str],
) -> None:
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    tail: deque[str] = deque(maxlen=200)
    with open(log_path, "w", encoding="utf-8") as log:
        log.write("$ " + scrub(" ".join(argv)) + "\n")
        oom_before = exit_reason.oom_kills()
        earlier_children = set(_children(os.getpid()))
        adopt_orphans(True)
        process = subprocess.Popen(
            list(argv),
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            errors="replace",
            bufsize=1,
            preexec_fn=_die_with_parent,
        )
        assert process.stdout is not None
        lock = threading.Lock()  # the log and the tail are shared with the reader thread

        def record(raw: str) -> None:
            line = scrub(raw)
            with lock:
                if log.closed:  # the step has ended; see _DRAIN_S
                    return
                log.write(line)
                log.flush()
                tail.append(line)
            on_line(line)

        reader = threading.Thread(target=_read_lines, args=(process.stdout, record), daemon=True)
        reader.start()
        try:
            returncode = process.wait()
        finally:  # also on Ctrl-C: no child of this step outlives it
            if process.returncode is None:
                process.kill()
                process.wait()
            end_adopted_children(keep=earlier_children)
            adopt_orphans(False)
        reader.join(_DRAIN_S)
        with lock:
            if reader.is_alive():
                log.write(
                    f"[tpu-sft] the process exited {returncode}, but something else still holds its output; "
                    f"stopped reading after {_DRAIN_S:g} s\n"
                )
            lines = list(tail)
    if returncode != 0:
        if returncode < 0:
            cause = exit_reason.describe(returncode, oom_before, exit_reason.oom_kills())
        else:
            cause = exit_reason.failure_cause(lines, returncode)
        raise StepFailed(cause, log_path, exit_reason.cap_tail(lines))


def _read_lines(stream: IO[str], record: Callable[[str], None]) -> None:
    with stream:
        for raw in stream:
            record(raw)
