"""Which attempt of the run a task takes on a host: the one detached job (remote/ssh/jobs.py) of `python -m workload
run` that goes from convert to keep, its attempts numbered on the host (`run-1`, `run-2`, …: workload/core/contract.py
RUN_JOB_PREFIX).

The run task (`python -m remote start-run`: remote/pipeline/start_run.py) asks for the whole run, every setting and
every step; each phase task then asks for its own part, with its own settings. Either takes the latest attempt where
it covers what it asks for (its steps reach the last one asked for, with the settings asked for) and is running or
has succeeded. Otherwise it stops that attempt where it still runs (the changed-input rule: ARCHITECTURE.md, "The
run") and starts the next: the run task with every setting, a phase task with the settings the latest attempt was
started with where they are a whole run's and agree with its own (the run task's: in a `pulumi up` it ran with
these), else with its own, to its phase's end. The workload's done-markers make a new attempt skip what is done with
the same inputs. A slice's workers agree on one attempt first (remote/pipeline/slice_claim.py) and start it with
these same functions.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
from dataclasses import dataclass
from typing import Sequence

from remote.pipeline.bootstrap.scheduler import finish_script, left_running
from remote.pipeline.request import PhaseRequest
from remote.ssh import jobs
from remote.ssh.connection import Connection, run
from remote.ssh.target import Target
from workload.core.config import ConfigError, PipelineConfig
from workload.core.contract import HF_TOKEN_SECRET, PHASE_UNTIL, PHASES, RUN_STEPS, run_attempt, run_job_id

log = logging.getLogger("remote")

RUNNING_OR_DONE = ("running", "succeeded")


@dataclass(frozen=True)
class RunPlan:
    """What an attempt runs: the run's settings and the step it ends with."""

    config: PipelineConfig
    until: str

    @property
    def whole(self) -> bool:
        """Whether it runs to the run's last step, as the run task's attempts do."""
        return self.until == RUN_STEPS[-1]


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


@dataclass(frozen=True)
class Claimed:
    """The attempt a task took: its job, its state then (worker 0's on a slice), whether this task started it, and
    whether no phase task had followed it before this one."""

    job_id: str
    state: jobs.JobStatus
    started: bool
    unfollowed: bool

    @property
    def quiet(self) -> bool:
        """Whether a phase task shows only its part's summary: the attempt had succeeded before the task came, and a
        task had followed it before. The first phase task to follow an attempt the run task started shows the part,
        as a task that started the attempt itself does."""
        return self.state.state == "succeeded" and not self.unfollowed


def claim(
    conn: Connection, request: PhaseRequest, code_dir: str, has_token: bool, *, whole_run: bool = False
) -> Claimed:
    """The attempt a phase task follows; with `whole_run`, the run task's (its request is the last phase's, whose
    settings are every setting and whose part ends the run)."""
    latest = latest_attempt(conn)
    if latest is not None and latest.followable(request):
        log.info("%s: re-attaching to job %s (%s)", conn.host, latest.state.job_id, latest.state.state)
        unfollowed = not whole_run and took_unfollowed(conn, latest.number)
        return Claimed(latest.state.job_id, latest.state, started=False, unfollowed=unfollowed)
    if latest is not None:
        stop_stale(conn, request, latest, whole_run)
    number = latest.number + 1 if latest is not None else 1
    plan = plan_for(request, latest)
    job_id, state = start_attempt(conn, request, plan, code_dir, has_token, number, unfollowed=whole_run)
    return Claimed(job_id, state, started=True, unfollowed=not whole_run)


def asked_settings(request: PhaseRequest, whole_run: bool) -> str:
    """The settings a task asks for, in a log line: the run's, or its phase's."""
    return "settings" if whole_run else f"{request.phase} settings"


def plan_for(request: PhaseRequest, latest: Attempt | None) -> RunPlan:
    """What a task starts: the whole run the latest attempt was started with, where its settings for this phase are
    the phase's own (the run task's attempt: its inputs are every setting); else a run of this phase's settings that
    ends with its part."""
    taken = latest.plan if latest is not None and latest.covers(request.phase, request.pipeline) else None
    if taken is not None and taken.whole:
        return taken
    if request.phase != PHASES[-1]:
        log.info("no whole run of these %s settings on the host: the run ends after %s", request.phase, request.phase)
    return RunPlan(request.pipeline, PHASE_UNTIL[request.phase])


def stop_stale(conn: Connection, request: PhaseRequest, latest: Attempt, whole_run: bool) -> None:
    """Cancel the latest attempt if it still runs, with other settings than the task's (or steps that stop short of
    its part): what it would go on to make is not what the task asks for."""
    if latest.state.state == "running":
        log.warning(
            "%s: job %s runs with other %s: cancelling it; the next attempt redoes what they changed",
            conn.host,
            latest.state.job_id,
            asked_settings(request, whole_run),
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


def _unfollowed_path(target: Target, number: int) -> str:
    """Present from the run task's start of attempt `number` until a phase task first follows it."""
    return f"{_record_path(target, number).removesuffix('.json')}.unfollowed"


def took_unfollowed(conn: Connection, number: int) -> bool:
    """Whether no phase task had followed attempt `number`, which the run task started; the first to ask takes the
    mark, in one round trip."""
    path = shlex.quote(_unfollowed_path(conn.target, number))
    return run(conn, f"rm -- {path} 2>/dev/null && echo taken; true").stdout.strip() == "taken"


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
    *,
    unfollowed: bool = False,
) -> tuple[str, jobs.JobStatus]:
    """Start attempt `number` of the run (`extra_argv` ends the workload's argv), unless it exists; `unfollowed`
    (the run task's attempts) marks it for the first phase task that follows it (`took_unfollowed`)."""
    job_id = run_job_id(number)
    record = _record_path(request.target, number)
    install = f"{record.removesuffix('.json')}.install.sh"
    unfinished = left_running(conn, request.bootstrap_spec()) if plan.until != PHASE_UNTIL["convert"] else ()
    writes = [
        f"mkdir -p -- {shlex.quote(os.path.dirname(record))}",
        f"printf %s {shlex.quote(json.dumps(plan.config.to_mapping()))} > {shlex.quote(record)}",
        f"printf '%s\\n' {shlex.quote(plan.until)} > {shlex.quote(record)}.until",
    ]
    if unfollowed:
        writes.append(f": > {shlex.quote(_unfollowed_path(request.target, number))}")
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
    if request.target.profile.kept_copy_dir is not None:
        argv += ["--kept-copy-dir", request.target.profile.kept_copy_dir]
    if RUN_STEPS.index(plan.until) >= RUN_STEPS.index("eval"):
        # Relative to the code dir, as the state dir holds both: bootstrap installed it (seed.py eval_install).
        argv += ["--eval-python", f"../{os.path.basename(request.eval_venv)}/bin/python"]
    if has_token:
        argv += ["--hf-token-file", f"../secrets/{HF_TOKEN_SECRET}"]
    argv += extra_argv
    command = f"cd {from_home(code_dir)} && exec {from_home(request.venv)}/bin/python {shlex.join(argv)}"
    return job_id, jobs.start(conn, job_id, command, env={"PYTHONUNBUFFERED": "1"})


def from_home(path: str) -> str:
    """A host path for a shell: absolute as given, relative ones under the remote user's home."""
    return shlex.quote(path) if path.startswith("/") else f'"$HOME"/{shlex.quote(path)}'
