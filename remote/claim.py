"""Which job a phase follows: the latest attempt with the same settings if it is running or succeeded, else a
new attempt of `python -m workload run` started as a detached job (remote/jobs.py)."""

from __future__ import annotations

import json
import logging
import os
import shlex

from remote import jobs
from remote.connection import Connection, run
from remote.phase_request import PhaseRequest
from workload.contract import HF_TOKEN_SECRET, PHASE_UNTIL

log = logging.getLogger("remote")


def claim(conn: Connection, request: PhaseRequest, code_dir: str, has_token: bool) -> tuple[str, jobs.JobStatus]:
    prefix = request.job_prefix
    listing = run(conn, f"ls -1 -- {shlex.quote(jobs.jobs_root(request.target))} 2>/dev/null; true").stdout.split()
    attempts = sorted(int(n.rsplit("-", 1)[1]) for n in listing
                      if n.startswith(prefix + "-") and n.rsplit("-", 1)[1].isdigit())
    if attempts:
        latest = f"{prefix}-{attempts[-1]}"
        state = jobs.status(conn, latest)
        if state.state in ("running", "succeeded"):
            log.info("%s: re-attaching to job %s (%s)", conn.host, latest, state.state)
            return latest, state
        log.info("%s: job %s %s; starting attempt %d", conn.host, latest, state.state, attempts[-1] + 1)
    job_id = f"{prefix}-{attempts[-1] + 1 if attempts else 1}"
    config_file = f"{request.target.state_dir}/runs/{prefix}.json"
    run(conn, f"mkdir -p -- {shlex.quote(os.path.dirname(config_file))} && printf %s "
              f"{shlex.quote(json.dumps(request.pipeline.to_mapping()))} > {shlex.quote(config_file)}")
    argv = [
        "-m", "workload", "run", "--config", f"../runs/{prefix}.json", "--work-dir", request.work_dir,
        "--output-dir", request.output_dir, "--until", PHASE_UNTIL[request.phase],
    ]
    if request.target.profile.runs_dir is not None:
        argv += ["--runs-dir", request.target.profile.runs_dir]
    if has_token:
        argv += ["--hf-token-file", f"../secrets/{HF_TOKEN_SECRET}"]
    # A job starts in its own directory: reach the code and the venv from the home directory.
    command = f"cd {from_home(code_dir)} && exec {from_home(request.venv)}/bin/python {shlex.join(argv)}"
    return job_id, jobs.start(conn, job_id, command, env={"PYTHONUNBUFFERED": "1"})


def from_home(path: str) -> str:
    """A host path for a shell: absolute as given, relative ones under the remote user's home."""
    return shlex.quote(path) if path.startswith("/") else f'"$HOME"/{shlex.quote(path)}'
