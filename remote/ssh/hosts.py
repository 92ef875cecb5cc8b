"""The hosts of a target (a multi-host slice's workers), and one step on all of them at once.

`workers_of` numbers the hosts by their place in `target.hosts` (0 is `target.host`); a slice's phase then
renumbers them by the platform's own worker ids, read on each host (remote/pipeline/worker_order.py;
ARCHITECTURE.md, "One VM or a slice"). Each worker gets its own connection; a failure on one is reported
as that worker's (`WorkerError`: its id and host, the cause's message and exit code).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Callable, Sequence, TypeVar

from remote.ssh.connection import Connection
from remote.ssh.errors import RemoteError
from remote.ssh.target import Target
from remote.ssh.wait import wait_for_ssh

T = TypeVar("T")


@dataclass(frozen=True)
class WorkerHost:
    """One host of a target, numbered by its worker id."""

    id: int
    host: str

    def __str__(self) -> str:
        return f"worker {self.id} ({self.host})"


def workers_of(target: Target) -> tuple[WorkerHost, ...]:
    return tuple(WorkerHost(number, host) for number, host in enumerate(target.hosts))


class WorkerError(RemoteError):
    """What stopped one worker: the worker named in front of the cause's own message; the cause's exit code."""

    def __init__(self, worker: WorkerHost, cause: RemoteError):
        self.worker, self.cause = worker, cause
        self.exit_code = cause.exit_code
        said = str(cause).removeprefix(f"{worker.host}: ")  # a host error names the host itself
        super().__init__(f"{worker}: {said}")


def on_every(workers: Sequence[WorkerHost], step: Callable[[WorkerHost], T]) -> list[T | RemoteError]:
    """`step(worker)` for every worker at once; each one's result, or the `RemoteError` that stopped it, in
    worker order. Waits for all. Anything else (a bug) is raised."""
    with ThreadPoolExecutor(max_workers=len(workers)) as pool:
        futures = [pool.submit(step, w) for w in workers]
    outcomes: list[T | RemoteError] = []
    for future in futures:
        try:
            outcomes.append(future.result())
        except RemoteError as e:
            outcomes.append(e)
    return outcomes


def on_every_host(target: Target, step: Callable[[str], T]) -> dict[str, T | RemoteError]:
    """`step(host)` on every host of the target at once: each host's result, or the `RemoteError` that stopped it
    there, in `target.hosts` order."""
    workers = workers_of(target)
    return {w.host: outcome for w, outcome in zip(workers, on_every(workers, lambda w: step(w.host)), strict=True)}


def each_said(workers: Sequence[WorkerHost], said: Sequence[str]) -> str:
    """`0 HOST (SAID), 1 HOST (SAID)`: every worker with what is said of it (`said[i]` of `workers[i]`), one line."""
    return ", ".join(f"{w.id} {w.host} ({s})" for w, s in zip(workers, said, strict=True))


def first_failure(workers: Sequence[WorkerHost], outcomes: Sequence[object]) -> WorkerError | None:
    """The failure of the lowest worker id among `outcomes` (from `on_every`), if any."""
    return next((WorkerError(w, o) for w, o in zip(workers, outcomes, strict=True) if isinstance(o, RemoteError)), None)


def on_all_or_raise(workers: Sequence[WorkerHost], step: Callable[[WorkerHost], T]) -> list[T]:
    """`on_every`, raising the first worker's failure."""
    outcomes = on_every(workers, step)
    failure = first_failure(workers, outcomes)
    if failure is not None:
        raise failure
    return outcomes  # type: ignore[return-value]  # no RemoteError left


def connect_all(target: Target, workers: Sequence[WorkerHost], deadline_s: float) -> list[Connection]:
    """Wait for SSH on every worker at once (a new slice's hosts answer late). If one does not answer, the
    others' connections are closed and its failure raised: nothing is started on a slice that is not whole."""
    return open_all(workers, lambda w: wait_for_ssh(target, deadline_s, w.host))


def open_all(workers: Sequence[WorkerHost], opener: Callable[[WorkerHost], Connection]) -> list[Connection]:
    """`opener(worker)` for every worker at once: all their connections, or, if one fails, the others closed and
    the first worker's failure raised."""
    outcomes = on_every(workers, opener)
    failure = first_failure(workers, outcomes)
    if failure is not None:
        for conn in outcomes:
            if isinstance(conn, Connection):
                conn.close()
        raise failure
    return outcomes  # type: ignore[return-value]  # connections only
