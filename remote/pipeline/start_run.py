"""The run task: what `pulumi up` runs after bootstrap, before the phases (`python -m remote start-run`).

Its settings are every setting the pipeline uses (the last phase's), so it runs again whenever any of them changes,
and the preview shows them. It ships `workload/` and places the token as a phase does, takes the whole run on the
host (claim.py: the latest attempt where it runs every step with these settings and is running or has succeeded,
else the next attempt, the latest stopped first where it still runs) and returns at once; on a slice, on every
worker. The phase tasks after it follow their parts of that attempt. The last stdout line is a JSON summary, as a
phase's.
"""

from __future__ import annotations

import json
from typing import Mapping, TextIO

from remote.pipeline.claim import claim
from remote.pipeline.request import PhaseRequest
from remote.pipeline.ship import code_dir, ship
from remote.pipeline.slice_claim import claim_on_slice
from remote.pipeline.slice_phase import connected_workers
from remote.pipeline.target import PipelineTarget
from remote.ssh.hosts import each_said, on_all_or_raise
from remote.ssh.wait import NEW_VM_DEADLINE_S, wait_for_ssh
from workload.core.contract import PHASES, RUN_TASK


def request_from_env(target: PipelineTarget, env: Mapping[str, str]) -> PhaseRequest:
    """The run's request: the last phase's, whose settings are every setting and whose part ends the run."""
    return PhaseRequest.from_env(PHASES[-1], target, env)


def start_run(request: PhaseRequest, out: TextIO, *, hf_token: str | None = None) -> int:
    """Take the whole run on the host or every worker; a line and a JSON summary on `out`. Returns 0: a failure
    raises, and the CLI ends with its exit code."""
    if len(request.target.hosts) > 1:
        with connected_workers(request) as (workers, conns):
            tokens = on_all_or_raise(workers, lambda w: ship(conns[w.id], request, hf_token, out, f"{w}: "))
            claimed, states = claim_on_slice(conns, workers, request, code_dir(request), tokens, whole_run=True)
        where = f"on {len(workers)} workers: {each_said(workers, [s.state for s in states])}"
    else:
        with wait_for_ssh(request.target, deadline_s=NEW_VM_DEADLINE_S) as conn:
            has_token = ship(conn, request, hf_token, out)
            claimed = claim(conn, request, code_dir(request), has_token, whole_run=True)
        where = f"on {request.target.host} ({claimed.state.state})"
    done = "started" if claimed.started else "already runs these settings"
    print(f"{RUN_TASK}: job {claimed.job_id} {where}: {done}; the phases follow it", file=out, flush=True)
    summary = {
        "event": "summary",
        "phase": RUN_TASK,
        "ok": True,
        "job": claimed.job_id,
        "state": claimed.state.state,
        "started": claimed.started,
    }
    print(json.dumps(summary), file=out, flush=True)
    return 0
