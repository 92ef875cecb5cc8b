"""Which job a phase follows: the latest attempt with the same settings if it is running or succeeded, else a
new attempt of `python -m workload run` started as a detached job (remote/ssh/jobs.py). A slice's workers agree on
one attempt first (remote/pipeline/slice_claim.py) and start it with these same functions."""

from __future__ import annotations

import json
import logging
import os
import shlex
from typing import Sequence

from remote.pipeline.request import PhaseRequest
from remote.ssh import jobs
from remote.ssh.connection import Connection, run
from workload.core.contract import HF_TOKEN_SECRET, PHASE_UNTIL

log = logging.getLogger("remote")


def claim(conn: Connection, request: PhaseRequest, code_dir: str, has_token: bool) -> tuple[str, jobs.JobStatus]:
    latest = latest_attempt(conn, request.job_prefix)
    if latest is not None:
        number, state = latest
        if state.state in ("running", "succeeded"):
            log.info("%s: re-attaching to job %s (%s)", conn.host, state.job_id, state.state)
            return state.job_id, state
        log.info("%s: job %s %s; starting attempt %d", conn.host, state.job_id, state.state, number + 1)
    return start_attempt(conn, request, code_dir, has_token, latest[0] + 1 if latest else 1)


def latest_attempt(conn: Connection, prefix: str) -> tuple[int, jobs.JobStatus] | None:
    """The highest attempt number of job `prefix` on the host and that job's state; None if there is none."""
    listing = run(conn, f"ls -1 -- {shlex.quote(jobs.jobs_root(conn.target))} 2>/dev/null; true").stdout.split()
    attempts = sorted(
        int(n.rsplit("-", 1)[1]) for n in listing if n.startswith(prefix + "-") and n.rsplit("-", 1)[1].isdigit()
    )
    if not attempts:
        return None
    return attempts[-1], jobs.status(conn, f"{prefix}-{attempts[-1]}")


def start_attempt(
    conn: Connection, request: PhaseRequest, code_dir: str, has_token: bool, number: int, extra_argv: Sequence[str] = ()
) -> tuple[str, jobs.JobStatus]:
    """Start attempt `number` of the phase's job (`extra_argv` ends the workload's argv), unless it exists."""
    prefix = request.job_prefix
    job_id = f"{prefix}-{number}"
    config_file = f"{request.target.state_dir}/runs/{prefix}.json"
    run(
        conn,
        f"mkdir -p -- {shlex.quote(os.path.dirname(config_file))} && printf %s "
        f"{shlex.quote(json.dumps(request.pipeline.to_mapping()))} > {shlex.quote(config_file)}",
    )
    argv = [
        "-m",
        "workload",
        "run",
        "--config",
        f"../runs/{prefix}.json",
        "--work-dir",
        request.work_dir,
        "--output-dir",
        request.output_dir,
        "--until",
        PHASE_UNTIL[request.phase],
    ]
    if request.target.profile.runs_dir is not None:
        argv += ["--runs-dir", request.target.profile.runs_dir]
    if has_token:
        argv += ["--hf-token-file", f"../secrets/{HF_TOKEN_SECRET}"]
    argv += extra_argv
    # A job starts in its own directory: reach the code and the venv from the home directory.
    command = f"cd {from_home(code_dir)} && exec {from_home(request.venv)}/bin/python {shlex.join(argv)}"
    return job_id, jobs.start(conn, job_id, command, env={"PYTHONUNBUFFERED": "1"})


def from_home(path: str) -> str:
    """A host path for a shell: absolute as given, relative ones under the remote user's home."""
    return shlex.quote(path) if path.startswith("/") else f'"$HOME"/{shlex.quote(path)}'
