"""One pipeline phase, start to finish: what each `pulumi up` post-deploy task runs.

    python -m remote phase bootstrap|convert|train|export

bootstrap installs MaxText on every host (bootstrap/); the others ship `workload/` to the host (ship.py), claim
the run (claim.py: the one job from convert to keep, which the run task before them started, start_run.py) and
follow their own part of it (part.py), printing one progress line per event (workload/run/progress.py); on a
multi-host slice, on every worker (slice_phase.py). The run outlives this process: running the same phase again
re-attaches to it, and a part that finished with the same settings is not run again. The last stdout line is always
a JSON summary (stack outputs are read from it). How a setting reaches the run, and the run itself: ARCHITECTURE.md.
"""

from __future__ import annotations

import json
import sys
from typing import TextIO

from remote.pipeline.bootstrap.scheduler import bootstrap_all, detached_log
from remote.pipeline.claim import Claimed, claim
from remote.pipeline.part import PartDone, PartPrinter, end_with_summary
from remote.pipeline.request import PhaseRequest
from remote.pipeline.ship import code_dir, prepare
from remote.pipeline.slice_phase import run_on_slice
from remote.ssh import jobs
from remote.ssh.connection import Connection
from remote.ssh.errors import RemoteError, describe
from remote.ssh.wait import NEW_VM_DEADLINE_S, wait_for_ssh


def run_phase(request: PhaseRequest, out: TextIO, *, hf_token: str | None = None) -> int:
    """Run one phase; progress lines then a JSON summary on `out`. Returns the exit code for the CLI."""
    if request.phase != "bootstrap" and len(request.target.hosts) > 1:
        return run_on_slice(request, out, hf_token=hf_token)
    conn = wait_for_ssh(request.target, deadline_s=NEW_VM_DEADLINE_S)
    if request.phase == "bootstrap":
        conn.close()  # bootstrap connects to every host itself
        return _bootstrap(request, out, hf_token)
    with conn:
        has_token = prepare(conn, request, hf_token, out)
        return _follow(request, claim(conn, request, code_dir(request), has_token), out, conn)


def _bootstrap(request: PhaseRequest, out: TextIO, hf_token: str | None) -> int:
    spec = request.bootstrap_spec()
    print(
        f"bootstrap: {len(spec.steps)} steps on {len(request.target.hosts)} host(s), "
        f"MaxText {request.pipeline.maxtext_version}",
        file=out,
        flush=True,
    )
    results = bootstrap_all(
        request.target, spec, stream=sys.stderr, deadline_s=NEW_VM_DEADLINE_S, hf_token=hf_token, leave_running=True
    )
    failed = {h: r for h, r in results.items() if isinstance(r, RemoteError)}
    for host, result in results.items():
        if isinstance(result, RemoteError):
            print(f"✗ {describe(result, host)}", file=out, flush=True)
        else:
            done = "installed " + ", ".join(result.steps_run) if result.installed else "already installed"
            left = "".join(
                f"; {step} goes on beside convert (log: {detached_log(request.target, step)})"
                for step in result.left_running
            )
            print(f"✓ {host}: {done}{left}", file=out, flush=True)
    summary = {
        "event": "summary",
        "phase": "bootstrap",
        "ok": not failed,
        # The reason its outcome line and `pulumi up`'s error show (workload/run/phase_outcome.py): each host's line
        **({"error": "; ".join(describe(r, h) for h, r in failed.items())} if failed else {}),
        "fingerprint": spec.fingerprint,
        "hosts": {
            h: ("failed" if isinstance(r, RemoteError) else "installed" if r.installed else "unchanged")
            for h, r in results.items()
        },
        "left_running": {
            h: list(r.left_running) for h, r in results.items() if not isinstance(r, RemoteError) and r.left_running
        },
    }
    print(json.dumps(summary), file=out, flush=True)
    return 0 if not failed else 1


def _follow(request: PhaseRequest, claimed: Claimed, out: TextIO, conn: Connection) -> int:
    job_id = claimed.job_id
    printer = PartPrinter(request.phase, out, quiet=claimed.quiet)
    log_path = jobs.log_path(request.target, job_id)
    print(
        f"{request.phase}: job {job_id} on {request.target.host} ({claimed.state.state}); "
        f"full log: {jobs.shown(log_path)}",
        file=out,
        flush=True,
    )
    try:
        code = jobs.follow(request.target, job_id, printer.line, conn=conn)
    except PartDone:
        code = 0
    summary = printer.summary
    missing = f"the job ended without a summary ({jobs.exit_detail(code)}); its log: {log_path}"
    end_with_summary(request.phase, summary, missing, out)
    return code if summary is not None else code or 1
