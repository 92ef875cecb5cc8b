"""Which run a phase follows on a host: the one detached job (remote/ssh/jobs.py) of `python -m workload run`
that goes from convert to keep, its attempts numbered on the host (`run-1`, `run-2`, …: workload/core/contract.py
RUN_JOB_PREFIX).

A phase follows the latest attempt where it covers the phase's part (its steps reach the phase's last one, with the
phase's own settings) and is running or has succeeded. Otherwise the phase starts the next attempt with every
setting the program recorded (remote/pipeline/run_settings.py), or its own where they are not at hand; an attempt
still running with other settings for this phase is cancelled first: the changed-input rule (ARCHITECTURE.md, "The
run"). The workload's done-markers make a new attempt skip what is done with the same inputs. A slice's workers
agree on one attempt first (remote/pipeline/slice_claim.py) and start it with these same functions.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
from dataclasses import dataclass
from typing import Sequence

from remote.pipeline import run_settings
from remote.pipeline.bootstrap.scheduler import finish_script, left_running
from remote.pipeline.request import PhaseRequest
from remote.ssh import jobs
from remote.ssh.connection import Connection, run
from remote.ssh.target import Target
from workload.core.config import ConfigError, PipelineConfig
from workload.core.contract import HF_TOKEN_SECRET, PHASE_UNTIL, RUN_STEPS, run_attempt, run_job_id

log = logging.getLogger("remote")

RUNNING_OR_DONE = ("running", "succeeded")


@dataclass(frozen=True)
class RunPlan:
    """What a phase would start: the run's settings and the step it ends with."""

    config: PipelineConfig
    until: str


@dataclass(frozen=True)
class Attempt:
    """An attempt of the run on a host: its number, its job's state and what it was started with (None where its
    record cannot be read)."""

    number: int
    state: jobs.JobStatus
    plan: RunPlan | None

    def covers(self, phase: str, own: PipelineConfig) -> bool:
        """Whether this attempt runs `phase`'s part with the phase's own settings."""
        return (
            self.plan is not None
            and RUN_STEPS.index(self.plan.until) >= RUN_STEPS.index(PHASE_UNTIL[phase])
            and self.plan.config.phase_settings(phase) == own.phase_settings(phase)
        )

    def followable(self, request: PhaseRequest) -> bool:
        return self.state.state in RUNNING_OR_DONE and self.covers(request.phase, request.pipeline)


def plan_for(request: PhaseRequest) -> RunPlan:
    """The whole run where the program recorded its settings, else a run that ends with this phase."""
    whole = run_settings.whole_run(request.phase, request.pipeline)
    if whole is not None:
        return RunPlan(whole, RUN_STEPS[-1])
    if request.phase != "export":
        log.info("no recorded run settings for these %s settings: the run ends after %s", request.phase, request.phase)
    return RunPlan(request.pipeline, PHASE_UNTIL[request.phase])


def claim(conn: Connection, request: PhaseRequest, code_dir: str, has_token: bool) -> tuple[str, jobs.JobStatus]:
    latest = latest_attempt(conn)
    if latest is not None:
        if latest.followable(request):
            log.info("%s: re-attaching to job %s (%s)", conn.host, latest.state.job_id, latest.state.state)
            return latest.state.job_id, latest.state
        stop_stale(conn, request, latest)
    return start_attempt(conn, request, plan_for(request), code_dir, has_token, latest.number + 1 if latest else 1)


def stop_stale(conn: Connection, request: PhaseRequest, latest: Attempt) -> None:
    """Cancel the latest attempt if it still runs, with other settings for this phase (or steps that stop short of
    it): what it would go on to make is not what this phase asks for."""
    if latest.state.state == "running":
        log.warning(
            "%s: job %s runs with other %s settings: cancelling it; the next attempt redoes what they changed",
            conn.host,
            latest.state.job_id,
            request.phase,
        )
        jobs.cancel(conn, latest.state.job_id)
    else:
        state = latest.state
        log.info("%s: job %s %s; starting attempt %d", conn.host, state.job_id, state.state, latest.number + 1)


def latest_attempt(conn: Connection) -> Attempt | None:
    """The run's highest attempt on the host, its state and its record; None if there is none."""
    number = highest_attempt(conn)
    if number is None:
        return None
    return Attempt(number, jobs.status(conn, run_job_id(number)), _read_plan(conn, number))


def highest_attempt(conn: Connection) -> int | None:
    """The number of the run's latest attempt on the host (the host's other jobs are not the run's)."""
    listing = run(conn, f"ls -1 -- {shlex.quote(jobs.jobs_root(conn.target))} 2>/dev/null; true").stdout.split()
    return max((n for n in map(run_attempt, listing) if n is not None), default=None)


def _record_path(target: Target, number: int) -> str:
    """Where attempt `number`'s settings are on the host; its `until` beside them."""
    return f"{target.state_dir}/runs/{run_job_id(number)}.json"


def _read_plan(conn: Connection, number: int) -> RunPlan | None:
    path = _record_path(conn.target, number)
    out = run(conn, f"cat -- {shlex.quote(path)} && echo && cat -- {shlex.quote(path)}.until", warn=True).stdout
    lines = out.strip().splitlines()
    if len(lines) != 2 or lines[1] not in RUN_STEPS:
        return None
    try:
        raw = json.loads(lines[0])
        return RunPlan(PipelineConfig.from_mapping(raw), lines[1]) if isinstance(raw, dict) else None
    except (ValueError, ConfigError):
        return None


def start_attempt(
    conn: Connection,
    request: PhaseRequest,
    plan: RunPlan,
    code_dir: str,
    has_token: bool,
    number: int,
    extra_argv: Sequence[str] = (),
) -> tuple[str, jobs.JobStatus]:
    """Start attempt `number` of the run (`extra_argv` ends the workload's argv), unless it exists."""
    job_id = run_job_id(number)
    record = _record_path(request.target, number)
    install = f"{record.removesuffix('.json')}.install.sh"
    unfinished = left_running(conn, request.bootstrap_spec()) if plan.until != PHASE_UNTIL["convert"] else ()
    writes = [
        f"mkdir -p -- {shlex.quote(os.path.dirname(record))}",
        f"printf %s {shlex.quote(json.dumps(plan.config.to_mapping()))} > {shlex.quote(record)}",
        f"printf '%s\\n' {shlex.quote(plan.until)} > {shlex.quote(record)}.until",
    ]
    if unfinished:
        script = finish_script(request.target, request.bootstrap_spec(), unfinished)
        writes.append(f"printf %s {shlex.quote(script)} > {shlex.quote(install)}")
    run(conn, " && ".join(writes))
    # A job starts in its own directory: the code dir is <state>/code, its records <state>/runs.
    argv = ["-m", "workload", "run", "--config", f"../runs/{job_id}.json", "--work-dir", request.work_dir]
    argv += ["--output-dir", request.output_dir, "--until", plan.until, "--phase-summaries"]
    if unfinished:
        # convert runs beside the install steps bootstrap left running; the run waits for them before train.
        argv += ["--finish-install", f"../runs/{job_id}.install.sh"]
    if request.target.profile.required_mount is not None and plan.until == RUN_STEPS[-1]:
        argv += ["--required-mount", request.target.profile.required_mount]  # export's task waits too, maybe later
    if request.target.profile.runs_dir is not None:
        argv += ["--runs-dir", request.target.profile.runs_dir]
    if has_token:
        argv += ["--hf-token-file", f"../secrets/{HF_TOKEN_SECRET}"]
    argv += extra_argv
    command = f"cd {from_home(code_dir)} && exec {from_home(request.venv)}/bin/python {shlex.join(argv)}"
    return job_id, jobs.start(conn, job_id, command, env={"PYTHONUNBUFFERED": "1"})


def from_home(path: str) -> str:
    """A host path for a shell: absolute as given, relative ones under the remote user's home."""
    return shlex.quote(path) if path.startswith("/") else f'"$HOME"/{shlex.quote(path)}'
