"""Which attempt of the run a slice's task takes: one attempt, the same on every worker.

The workers re-attach only to an attempt that is whole: the same latest attempt on every worker, each running or
succeeded, and covering what the task asks for with its settings (read on worker 0: every worker starts an attempt
with the same). Anything else is stopped where it still runs, and attempt N + 1 (N the highest on any worker) is
started on every worker, even one whose own job succeeded (why: ARCHITECTURE.md, "One VM or a slice"), with what
remote/pipeline/claim.py `plan_for` reads on worker 0. Each worker's argv ends with `--worker-id I
--worker-hostnames H0,H1,…`.
"""

from __future__ import annotations

import logging
from typing import Sequence

from remote.pipeline.claim import Claimed, asked_settings, latest_attempt, plan_for, start_attempt, took_unfollowed
from remote.pipeline.request import PhaseRequest
from remote.ssh import jobs
from remote.ssh.connection import Connection
from remote.ssh.hosts import WorkerHost, first_failure, on_all_or_raise, on_every
from workload.core.contract import run_job_id

log = logging.getLogger("remote")


def claim_on_slice(
    conns: Sequence[Connection],
    workers: Sequence[WorkerHost],
    request: PhaseRequest,
    code_dir: str,
    has_token: Sequence[bool],
    *,
    whole_run: bool = False,
) -> tuple[Claimed, list[jobs.JobStatus]]:
    """The attempt every worker runs (its state worker 0's) and each worker's state of it (in worker order);
    `whole_run` as in claim.py `claim`."""
    latest = on_all_or_raise(workers, lambda w: latest_attempt(conns[w.id]))
    newest = max((found.number for found in latest if found is not None), default=0)
    attempts = [found if found is not None and found.number == newest else None for found in latest]
    states = [a.state if a is not None else None for a in attempts]
    leader = attempts[0]
    whole = all(a is not None and a.state.state in ("running", "succeeded") for a in attempts)
    if newest and whole and leader is not None and leader.covers(request.phase, request.pipeline):
        log.info("re-attaching to job %s on every worker", run_job_id(newest))
        unfollowed = not whole_run and took_unfollowed(conns[0], newest)
        claimed = Claimed(run_job_id(newest), leader.state, started=False, unfollowed=unfollowed)
        return claimed, [s for s in states if s is not None]
    if newest:
        log.info(
            "job %s is not whole on every worker, or runs with other %s (%s): starting attempt %d on every worker",
            run_job_id(newest),
            asked_settings(request, whole_run),
            ", ".join(f"{w.id}: {s.state if s else 'none'}" for w, s in zip(workers, states, strict=True)),
            newest + 1,
        )
        running = [w for w, s in zip(workers, states, strict=True) if s is not None and s.state == "running"]
        if running:
            on_all_or_raise(running, lambda w: jobs.cancel(conns[w.id], run_job_id(newest)))
    plan = plan_for(request, latest[0])
    hostnames = hostnames_flag(workers)
    outcomes = on_every(
        workers,
        lambda w: start_attempt(
            conns[w.id],
            request,
            plan,
            code_dir,
            has_token[w.id],
            newest + 1,
            ["--worker-id", str(w.id), "--worker-hostnames", hostnames],
            unfollowed=whole_run and w.id == 0,  # worker 0's is the attempt the phases follow
        ),
    )
    failure = first_failure(workers, outcomes)
    if failure is not None:
        # A partial attempt would wait for its missing processes: stop the started ones (a re-run starts anew).
        started = [w for w, o in zip(workers, outcomes, strict=True) if isinstance(o, tuple)]
        on_every(started, lambda w: jobs.cancel(conns[w.id], run_job_id(newest + 1)))
        raise failure
    started_states = [o[1] for o in outcomes if isinstance(o, tuple)]
    return Claimed(run_job_id(newest + 1), started_states[0], started=True, unfollowed=not whole_run), started_states


def hostnames_flag(workers: Sequence[WorkerHost]) -> str:
    """`--worker-hostnames`' value: every host, in worker order."""
    return ",".join(w.host for w in workers)
