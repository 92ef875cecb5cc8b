"""The JSON summary a `phase` prints as its last stdout line when it did not get one from its job: the
phase failed before the job, the job ended without a summary, the host stayed unreachable, the input was
bad, or the user pressed Ctrl-C. Pulumi reads stack outputs from that line, so it is printed on every path."""

from __future__ import annotations

from remote.ssh.errors import RemoteError
from workload.core.config import ConfigError

INTERRUPTED = "interrupted; a started job keeps running: run the same phase again to re-attach to it"


def failed(phase: str, reason: str) -> dict:
    return {"event": "summary", "phase": phase, "ok": False, "error": reason}


def reason_for(error: BaseException) -> str:
    """One line for the summary: the error's own message where it is one of ours, else only its type (the
    CLI's last-resort handler shows where the details are)."""
    if isinstance(error, KeyboardInterrupt):
        return INTERRUPTED
    if isinstance(error, (RemoteError, ConfigError)):
        return str(error).splitlines()[0] if str(error) else type(error).__name__
    return f"unexpected error ({type(error).__name__}); see stderr"


def worker_failed(phase: str, reason: str, worker_id: int, host: str) -> dict:
    """A slice's phase that failed on one worker: which one, as fields too."""
    return {**failed(phase, reason), "worker": worker_id, "host": host}
