"""`phase convert|train|export` on a multi-host slice: the same run on every worker, worker 0's part followed.

Worker 0's progress and summary of the phase's part are what the phase prints, as on one host; the others' jobs
are polled every `POLL_S`. The first worker whose job fails, dies, is cancelled or stays unreachable for
`UNREACHABLE_S` stops the job on every other worker and is named in the summary. Interrupted (Ctrl-C), every job
goes on. How a phase runs on a slice, and why: ARCHITECTURE.md, "One VM or a slice".
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import shlex
import threading
import time
from dataclasses import dataclass
from typing import Iterator, Sequence, TextIO

from remote.pipeline import outcome, worker_order
from remote.pipeline.claim import Claimed
from remote.pipeline.part import PartDone, PartPrinter, end_with_summary
from remote.pipeline.request import PhaseRequest
from remote.pipeline.ship import code_dir, prepare
from remote.pipeline.slice_claim import claim_on_slice
from remote.ssh import jobs
from remote.ssh.connection import Connection, run
from remote.ssh.errors import EXIT_JOB_LOST, EXIT_UNREACHABLE, JobLost, RemoteError, Unreachable
from remote.ssh.hosts import WorkerHost, connect_all, each_said, on_all_or_raise, on_every, workers_of
from remote.ssh.target import Target
from remote.ssh.wait import NEW_VM_DEADLINE_S
from workload.core.contract import EXIT_UNEXPECTED, PHASE_UNTIL, RUN_STEPS
from workload.run.progress import parse_event
from workload.spend.bill import total as total_bill

log = logging.getLogger("remote")

POLL_S = 2.0  # how often the other workers' jobs are looked at: one short command each
WORKERS_END_WITH = "train"  # the last step of every worker's run but worker 0's
UNREACHABLE_S = 600.0  # a worker unreachable this long counts as lost (worker 0's follow gives up after as long)


@dataclass(frozen=True)
class WorkerFailure:
    worker: WorkerHost
    what: str  # how its job ended, e.g. "failed: exited with code 3"
    log_path: str
    exit_code: int  # the phase's: the job's own where it has one
    cause: str = ""  # the worker's own one-line error, where its workload printed one

    def __str__(self) -> str:
        cause = f" ({self.cause})" if self.cause else ""
        return f"{self.worker}: job {self.what}{cause}; its log: {self.log_path}"


def run_on_slice(request: PhaseRequest, out: TextIO, *, hf_token: str | None = None) -> int:
    with connected_workers(request) as (workers, conns):
        has_token = on_all_or_raise(workers, lambda w: prepare(conns[w.id], request, hf_token, out, f"{w}: "))
        claimed, states = claim_on_slice(conns, workers, request, code_dir(request), has_token)
        where = each_said(workers, [s.state for s in states])
        print(
            f"{request.phase}: job {claimed.job_id} on {len(workers)} workers: {where}; following worker 0; full log "
            f"on each: {_shown_log(request.target, claimed.job_id)}",
            file=out,
            flush=True,
        )
        return _follow(request, workers, conns, claimed, out)


@contextlib.contextmanager
def connected_workers(request: PhaseRequest) -> Iterator[tuple[tuple[WorkerHost, ...], list[Connection]]]:
    """Every worker of the slice and a connection to it, in the platform's worker order (each host's tpu-env), so
    that conns[i] is worker i's; each connection closed as a `with` does (abandoned first on Ctrl-C)."""
    placed = workers_of(request.target)  # the target's order: a guess from the instance names
    conns = connect_all(request.target, placed, NEW_VM_DEADLINE_S)
    with contextlib.ExitStack() as opened:
        for conn in conns:
            opened.enter_context(conn)
        yield worker_order.by_metadata(placed, conns)


def _follow(
    request: PhaseRequest,
    workers: Sequence[WorkerHost],
    conns: Sequence[Connection],
    claimed: Claimed,
    out: TextIO,
) -> int:
    job_id = claimed.job_id
    printer = PartPrinter(request.phase, out, quiet=claimed.quiet)
    watch = _Watch(request.target, workers[1:], conns, job_id)
    failure: WorkerFailure | None
    try:
        try:
            # Led by worker 0: where a lost link reconnects (the target's first host may be another worker).
            leader = request.target.led_by(workers[0].host)
            code = jobs.follow(leader, job_id, printer.line, conn=conns[0], on_status=watch.check)
        except PartDone:
            code = 0
        failure = _ended(workers[0], request.target, job_id, code)
        # The other workers' runs end with train (workload/run/pipeline.py LEADER_ONLY): a part that reaches it
        # waits for their jobs to end; convert's goes on while they train.
        if failure is None and RUN_STEPS.index(PHASE_UNTIL[request.phase]) >= RUN_STEPS.index(WORKERS_END_WITH):
            running = list(watch.pending)
            if running:
                print(
                    f"{request.phase}: worker 0's part succeeded; waiting for {', '.join(map(str, running))}",
                    file=out,
                    flush=True,
                )
            failure = watch.wait()
    except _AnotherFailed:
        failure = watch.failure
    except JobLost as e:
        failure = WorkerFailure(
            workers[0], f"{job_id} {e.state} without an exit code", _shown_log(request.target, job_id), EXIT_JOB_LOST
        )
    except Unreachable as e:
        failure = WorkerFailure(
            workers[0], f"{job_id} unreachable: {e.reason}", _shown_log(request.target, job_id), EXIT_UNREACHABLE
        )
    finally:
        watch.stop()  # on Ctrl-C too: nothing is cancelled, every job goes on
    if failure is not None:
        _cancel_all_but(failure.worker, workers, conns, job_id)
        failure = dataclasses.replace(failure, cause=_reported_error(conns[failure.worker.id], request.target, job_id))
        print(f"✗ {failure}", file=out, flush=True)
        print(
            json.dumps(outcome.worker_failed(request.phase, str(failure), failure.worker.id, failure.worker.host)),
            file=out,
            flush=True,
        )
        return failure.exit_code
    summary = printer.summary
    if summary and summary.get("bill"):
        summary = {**summary, "bill": _slice_bill(summary, workers, conns, request.target, job_id)}
    missing = f"worker 0's job ended without a summary; its log: {_shown_log(request.target, job_id)}"
    end_with_summary(request.phase, summary, missing, out)
    return 0


def _slice_bill(
    own: dict, workers: Sequence[WorkerHost], conns: Sequence[Connection], target: Target, job_id: str
) -> dict:
    """Worker 0's reading in its part's summary `own`, and every other worker's, from the summary its job printed
    for the same part (or its last, on a worker whose run ends sooner), added up. A worker whose reading cannot be
    read is named, not guessed."""
    others = workers[1:]
    summaries = on_every(others, lambda w: _last_summary(conns[w.id], target, job_id, own.get("until")))
    bills, unread = [own["bill"]], []
    for worker, summary in zip(others, summaries, strict=True):
        bill = summary.get("bill") if isinstance(summary, dict) else None
        if bill:
            bills.append(bill)
        else:
            unread.append(str(worker))
    return {**total_bill(bills), "unread": unread} if unread else total_bill(bills)


def _ended(worker: WorkerHost, target: Target, job_id: str, code: int) -> WorkerFailure | None:
    if code == 0:
        return None
    return WorkerFailure(worker, f"{job_id} failed: {jobs.exit_detail(code)}", _shown_log(target, job_id), code)


def _shown_log(target: Target, job_id: str) -> str:
    """The job's log as a user reads it: the same path on every worker."""
    return jobs.shown(jobs.log_path(target, job_id))


def _reported_error(conn: Connection, target: Target, job_id: str) -> str:
    """What the failed worker's workload said went wrong: the error of the summary it printed last (best effort;
    workload errors are one line and carry no secret). Only worker 0's output is shown, so this is the one place
    another worker's own reason (e.g. its trainer killed by the OOM killer) reaches the user."""
    try:
        return str(_last_summary(conn, target, job_id).get("error") or "")
    except RemoteError:
        return ""


def _last_summary(conn: Connection, target: Target, job_id: str, until: str | None = None) -> dict:
    """The summary a worker's job printed last ({} if none), or its last for the part that ends with `until`: its
    own output, which only worker 0's is shown."""
    log_path = shlex.quote(jobs.log_path(target, job_id))
    printed = run(conn, f'grep -F \'"event": "summary"\' -- {log_path} | tail -n 20', warn=True).stdout
    summaries = []
    for line in printed.splitlines():
        event = parse_event(line)
        if event is not None and event["event"] == "summary":
            summaries.append(event)
    for_part = [s for s in summaries if until is None or s.get("until") == until]
    return (for_part or summaries or [{}])[-1]


def _cancel_all_but(
    failed: WorkerHost, workers: Sequence[WorkerHost], conns: Sequence[Connection], job_id: str
) -> None:
    """Best effort: a worker that cannot be reached now is named in the log; its job is left to end alone."""
    others = [w for w in workers if w != failed]
    for worker, result in zip(others, on_every(others, lambda w: jobs.cancel(conns[w.id], job_id)), strict=True):
        if isinstance(result, Exception):
            log.warning("%s: could not cancel job %s: %s", worker, job_id, result)


class _AnotherFailed(Exception):
    """Raised inside worker 0's follow (its status callback) to stop following once another worker failed."""


class _Watch:
    """Workers 1…N-1's jobs, polled in a thread until each has succeeded or one has failed."""

    def __init__(self, target: Target, workers: Sequence[WorkerHost], conns: Sequence[Connection], job_id: str):
        self.target, self.conns, self.job_id = target, conns, job_id
        self.pending = list(workers)
        self.failure: WorkerFailure | None = None
        self._stopped = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slice-watch", daemon=True)
        self._thread.start()

    def check(self, _state: jobs.JobStatus) -> None:
        if self.failure is not None:
            raise _AnotherFailed

    def wait(self) -> WorkerFailure | None:
        """Until every watched job has ended; the first failure, if one failed."""
        self._thread.join()
        return self.failure

    def stop(self) -> None:
        self._stopped.set()
        # A poll in flight ends within a command timeout; its connection must be free before anyone else uses it.
        self._thread.join(timeout=self.target.command_timeout)

    def _run(self) -> None:
        down_since: dict[int, float] = {}
        while self.pending and self.failure is None and not self._stopped.is_set():
            for worker in list(self.pending):
                try:
                    state = jobs.status(self.conns[worker.id], self.job_id)
                except RemoteError as e:
                    # A host going down fails a poll in more ways than Unreachable (a session cut mid-command: an
                    # exit of -1). Any of them is no answer; an exception left to end this thread would leave
                    # worker 0's follow waiting forever on a job that never ends.
                    reason = e.reason if isinstance(e, Unreachable) else str(e)
                    since = down_since.setdefault(worker.id, time.monotonic())
                    if time.monotonic() - since >= UNREACHABLE_S:
                        self._fail(
                            worker, f"{self.job_id} unreachable for {UNREACHABLE_S:g} s: {reason}", EXIT_UNREACHABLE
                        )
                    continue
                except Exception as e:  # noqa: BLE001  any other error would end this thread silently, and the phase
                    # with it never (see above): it ends the phase instead, naming the worker and the error
                    self._fail(
                        worker, f"{self.job_id}: its status poll failed: {type(e).__name__}: {e}", EXIT_UNEXPECTED
                    )
                    return
                down_since.pop(worker.id, None)
                if state.state == "succeeded":
                    self.pending.remove(worker)
                elif state.state != "running":  # failed, died, cancelled, or absent
                    self._fail(
                        worker,
                        f"{self.job_id} {state.state}: {state.detail or 'no such job'}",
                        state.exit_code or EXIT_JOB_LOST,
                    )
                if self.failure is not None:
                    return
            self._stopped.wait(POLL_S)

    def _fail(self, worker: WorkerHost, what: str, exit_code: int) -> None:
        if not self._stopped.is_set():  # a poll cut short by a stop is no failure
            self.failure = WorkerFailure(worker, what, _shown_log(self.target, self.job_id), exit_code)
