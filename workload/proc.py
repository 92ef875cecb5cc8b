"""Runs one MaxText subprocess: its merged output goes line by line to a full raw log (token scrubbed) and
to a callback; a non-zero exit becomes `StepFailed` with a one-line cause and the log's tail.

The step ends when the subprocess itself ends, whatever its children do. MaxText's children (a
`multiprocessing` spawn worker and its `resource_tracker`) survive a SIGKILL of the trainer and keep its
stdout pipe open; waiting for the pipe's EOF would wait forever. So the subprocess leads its own process
group, its output is read in a thread, the runner waits on the process, and when it has ended the rest of
its group is killed.
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

from workload import exit_reason
from workload.events import cap_tail, failure_cause

_PR_SET_PDEATHSIG = 1
# After the process has ended and its group was killed, the pipe closes at once; a descendant that left the
# group (setsid) could still hold it: its remaining output is not worth a hang.
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


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass  # nothing left in the group


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
        process = subprocess.Popen(
            list(argv), env=dict(env), cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1, process_group=0,
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
            kill_group(process.pid)
        reader.join(_DRAIN_S)
        with lock:
            if reader.is_alive():
                log.write(f"[tpu-sft] the process exited {returncode}, but a descendant outside its process group "
                          f"still holds its output; stopped reading after {_DRAIN_S:g} s\n")
            lines = list(tail)
    if returncode != 0:
        if returncode < 0:
            cause = exit_reason.describe(returncode, oom_before, exit_reason.oom_kills())
        else:
            cause = failure_cause(lines, returncode)
        raise StepFailed(cause, log_path, cap_tail(lines))


def _read_lines(stream: IO[str], record: Callable[[str], None]) -> None:
    with stream:
        for raw in stream:
            record(raw)
