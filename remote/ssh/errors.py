"""What can go wrong when reaching a host, as exceptions that carry the exit code the CLI returns.

Messages are one line and never contain a command line, an environment value or a secret: they name the
host, what happened and what to do about it.
"""

from __future__ import annotations

from workload.core.contract import EXIT_BAD_INPUT

EXIT_OK = 0
EXIT_FAILED = 1  # a remote command or bootstrap step exited non-zero
# EXIT_BAD_INPUT (2, every CLI's): the target, a flag, a job id or a setting is invalid
EXIT_HOST_KEY = 65  # host key unknown (and trust-on-first-use off) or changed
EXIT_NOT_FOUND = 66  # no such job, or a remote file to fetch is missing
EXIT_AUTH = 67  # the server refused the key
EXIT_UNREACHABLE = 69  # no answer within the timeouts (connect, banner, command) or connection refused
EXIT_JOB_LOST = 70  # the job ended without an exit code: killed, host rebooted, or cancelled
EXIT_VERIFY = 71  # a fetched file's size or sha256 differs from the remote one
EXIT_SOME_HOSTS_FAILED = 73  # `run --all-hosts`: at least one host failed; each is named


class RemoteError(Exception):
    exit_code = 1


class CommandFailed(RemoteError):
    """A command on the host exited non-zero: the one translation of Invoke's `UnexpectedExit`. The message
    names the host and the exit code only (a command line may hold what must not be logged); `tail` keeps the
    last lines of its output for a caller that shows them."""

    exit_code = EXIT_FAILED

    def __init__(self, host: str, exited: int, tail: tuple[str, ...], what: str = "a command"):
        self.host, self.exited, self.tail = host, exited, tail
        super().__init__(f"{host}: {what} exited {exited}")


class TargetError(RemoteError, ValueError):
    """The target description is wrong: names the field, the problem and the fix."""

    exit_code = EXIT_BAD_INPUT

    def __init__(self, field: str, problem: str, fix: str):
        self.field, self.problem, self.fix = field, problem, fix
        super().__init__(f"target.{field}: {problem}. Fix: {fix}")


class BadInput(RemoteError, ValueError):
    exit_code = EXIT_BAD_INPUT


class HostKeyError(RemoteError):
    exit_code = EXIT_HOST_KEY


class AuthError(RemoteError):
    exit_code = EXIT_AUTH


class Unreachable(RemoteError):
    exit_code = EXIT_UNREACHABLE

    def __init__(self, host: str, reason: str):
        self.host, self.reason = host, reason
        super().__init__(f"{host}: {reason}")


class JobNotFound(RemoteError):
    exit_code = EXIT_NOT_FOUND


class JobLost(RemoteError):
    """The job is gone and left no exit code; `state` says how (died or cancelled)."""

    exit_code = EXIT_JOB_LOST

    def __init__(self, job_id: str, state: str, detail: str):
        self.job_id, self.state = job_id, state
        super().__init__(f"job {job_id} {state} without an exit code: {detail}")


class FetchError(RemoteError):
    exit_code = EXIT_VERIFY


class RemoteFileMissing(RemoteError):
    exit_code = EXIT_NOT_FOUND


def describe(error: BaseException, host: str | None = None) -> str:
    """One line for any failure, naming `host` once if given: ours as written, anyone else's as its type and
    first line (paramiko's messages run to several)."""
    if isinstance(error, RemoteError):
        line = str(error)
    else:
        text = str(error).strip().splitlines()
        line = f"{type(error).__name__}: {text[0]}" if text else type(error).__name__
    return line if host is None or line.startswith(f"{host}: ") else f"{host}: {line}"
