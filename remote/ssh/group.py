"""The same command on every host of a target (main host and workers) in parallel, one result per host."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

from fabric import ThreadingGroup
from fabric.exceptions import GroupException
from invoke.exceptions import CommandTimedOut

from remote.ssh.connection import NETWORK_ERRORS, Connection, env_prefix
from remote.ssh.errors import describe
from remote.ssh.target import Target


@dataclass(frozen=True)
class HostResult:
    host: str
    exit_code: int | None  # None: the command never completed there (see `error`)
    stdout: str = ""
    stderr: str = ""
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.exit_code == 0


def run_all(
    target: Target, command: str, *, env: Mapping[str, str] | None = None, timeout: float | None = None
) -> dict[str, HostResult]:
    """Run `command` on every host at once; a host that fails is reported by name, the others still run.

    Never raises for a host's failure: check `HostResult.ok` / `error` for each host (in `target.hosts` order).
    """
    line = env_prefix(env) + command
    connections = [Connection(target, host) for host in target.hosts]
    group = ThreadingGroup.from_connections(connections)
    try:
        outcome = group.run(line, warn=True, hide=True, in_stream=False, timeout=timeout or target.command_timeout)
    except GroupException as e:
        outcome = e.result
    finally:
        group.close()
    results = {}
    for conn, value in outcome.items():
        if isinstance(value, BaseException):
            results[conn.host] = HostResult(conn.host, None, error=_failure_line(conn, value))
        else:
            results[conn.host] = HostResult(conn.host, value.exited, value.stdout, value.stderr)
    return {host: results[host] for host in target.hosts}


def _failure_line(conn: Connection, error: BaseException) -> str:
    if isinstance(error, CommandTimedOut):
        return f"{conn.host}: no answer within {error.timeout:g} s (command timeout)"
    if isinstance(error, NETWORK_ERRORS):
        return f"{conn.host}: connection lost: {describe(error)}"
    return describe(error, conn.host)
