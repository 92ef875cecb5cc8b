"""Runs one MaxText subprocess: its merged output goes line by line to a full raw log (token scrubbed) and
to a callback; a non-zero exit becomes `StepFailed` with a one-line cause and the log's tail."""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
from collections import deque
from typing import Callable, Mapping

from workload.events import cap_tail, failure_cause

_PR_SET_PDEATHSIG = 1


class StepFailed(Exception):
    def __init__(self, cause: str, log: str | None = None, tail: list[str] | None = None):
        super().__init__(cause)
        self.cause, self.log, self.tail = cause, log, tail or []


def _die_with_parent() -> None:
    """A MaxText child must not outlive the runner: an orphaned trainer keeps holding the TPU
    ("TPU already in use") and keeps writing checkpoints under a run that a re-run resumes."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


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
        process = subprocess.Popen(
            list(argv), env=dict(env), cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, text=True, errors="replace", bufsize=1, preexec_fn=_die_with_parent,
        )
        assert process.stdout is not None
        for raw in process.stdout:
            line = scrub(raw)
            log.write(line)
            log.flush()
            tail.append(line)
            on_line(line)
        returncode = process.wait()
    if returncode != 0:
        raise StepFailed(failure_cause(list(tail), returncode), log_path, cap_tail(list(tail)))
