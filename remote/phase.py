"""One pipeline phase on the VM, start to finish: what each `pulumi up` post-deploy task runs.

    python -m remote phase bootstrap|convert|train|export

bootstrap installs MaxText (remote.bootstrap); the others ship `workload/` to the host, start
`python -m workload run --until <step>` there as a detached job and follow it, printing one progress line per
event. The job outlives this process: if it is interrupted (Ctrl-C, a laptop asleep, a dropped link), running
the same phase again re-attaches to the same job instead of starting a second one. A job that finished with
the same settings is not run again (its summary is printed again); one that failed is retried as a new
attempt, and the workload's own done-markers and checkpoints make that attempt resume, not restart.

The last stdout line is always a JSON summary (stack outputs are read from it).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import shlex
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, TextIO

from invoke.exceptions import UnexpectedExit

from remote import jobs
from remote.bootstrap import BootstrapSpec, bootstrap_all, spec_for
from remote.connection import Connection, run
from remote.errors import BadInput, RemoteError
from remote.sync import push_tree
from remote.target import Target
from remote.wait import wait_for_ssh
from workload.config import ConfigError, PipelineConfig

log = logging.getLogger("remote")

PHASES = ("bootstrap", "convert", "train", "export")
UNTIL = {"convert": "convert", "train": "train", "export": "keep"}  # the workload step each phase ends with
WORKLOAD_DIR = Path(__file__).resolve().parent.parent / "workload"

PIPELINE_ENV = "TPU_SFT_PIPELINE"  # PipelineConfig.to_mapping() JSON
BOOTSTRAP_SPEC_ENV = "TPU_SFT_BOOTSTRAP_SPEC"  # a BootstrapSpec JSON replacing the seed's install
WORK_DIR_ENV = "TPU_SFT_WORK_DIR"
OUTPUT_DIR_ENV = "TPU_SFT_OUTPUT_DIR"
DEFAULT_WORK_DIR = "/dev/shm/tpu-sft"  # fast scratch, as the seed; lost on reboot, hence the keep step
DATA_DISK_MOUNT = "/mnt/tpu-sft-data"  # where the VM's startup script mounts the data disk (infra/disk.py)
DEFAULT_OUTPUT_DIR = f"{DATA_DISK_MOUNT}/tpu-sft"
MOUNT_WAIT_S = 300  # a first boot formats the disk before mounting it
TOKEN_NAME = "hf_token"
NEW_VM_DEADLINE_S = 600  # a VM just created by `pulumi up` may take minutes to answer SSH


@dataclass(frozen=True)
class PhaseRequest:
    phase: str
    target: Target
    pipeline: PipelineConfig
    work_dir: str = DEFAULT_WORK_DIR
    output_dir: str = DEFAULT_OUTPUT_DIR
    bootstrap_spec: BootstrapSpec | None = None

    @classmethod
    def from_env(cls, phase: str, target: Target, env: Mapping[str, str]) -> "PhaseRequest":
        if phase not in PHASES:
            raise BadInput(f"phase {phase!r} is not one of {', '.join(PHASES)}")
        if not env.get(PIPELINE_ENV):
            raise BadInput(f"${PIPELINE_ENV} is not set: give the pipeline settings as PipelineConfig JSON")
        try:
            pipeline = PipelineConfig.from_mapping(json.loads(env[PIPELINE_ENV]))
        except json.JSONDecodeError as e:
            raise BadInput(f"${PIPELINE_ENV} is not valid JSON ({e.msg}); give PipelineConfig JSON") from None
        except ConfigError as e:
            raise BadInput(f"${PIPELINE_ENV}: {e}") from None
        spec = BootstrapSpec.from_json(env[BOOTSTRAP_SPEC_ENV]) if env.get(BOOTSTRAP_SPEC_ENV) else None
        return cls(
            phase=phase,
            target=target,
            pipeline=pipeline,
            work_dir=env.get(WORK_DIR_ENV) or DEFAULT_WORK_DIR,
            output_dir=env.get(OUTPUT_DIR_ENV) or DEFAULT_OUTPUT_DIR,
            bootstrap_spec=spec,
        )

    @property
    def venv(self) -> str:
        """Where MaxText is installed on the host: with everything else of tpu-sft, under its state dir."""
        return f"{self.target.state_dir}/maxtext_venv"

    @property
    def job_prefix(self) -> str:
        """Same settings, same job: what lets a re-run find (and not repeat) the work of an earlier one."""
        digest = hashlib.sha256(json.dumps(self.pipeline.to_mapping(), sort_keys=True).encode()).hexdigest()
        return f"{self.phase}-{digest[:16]}"


def run_phase(request: PhaseRequest, out: TextIO, *, hf_token: str | None = None) -> int:
    """Run one phase; progress lines then a JSON summary on `out`. Returns the exit code for the CLI."""
    conn = wait_for_ssh(request.target, deadline_s=NEW_VM_DEADLINE_S)
    if request.phase == "bootstrap":
        conn.close()  # bootstrap connects to every host itself
        return _bootstrap(request, out)
    with conn:
        code_dir = f"{request.target.state_dir}/code"
        pushed = push_tree(conn, WORKLOAD_DIR, f"{code_dir}/workload")
        if pushed.uploaded:
            print(f"shipped workload/ ({len(pushed.uploaded)} files changed)", file=out, flush=True)
        has_token = _place_token(conn, hf_token)
        if not has_token and request.pipeline.profile == "full":
            raise BadInput("no HF token on the host and $HF_TOKEN is empty, but the Gemma weights are gated: "
                           "export HF_TOKEN, or pipe it into `python -m remote put-secret hf_token`")
        if request.phase == "export" and request.output_dir.startswith(DATA_DISK_MOUNT + "/"):
            require_mounted(conn, DATA_DISK_MOUNT, MOUNT_WAIT_S)
        job_id, state = _claim(conn, request, code_dir, has_token)
        return _follow(request, job_id, state, out, conn)


def _bootstrap(request: PhaseRequest, out: TextIO) -> int:
    spec = request.bootstrap_spec or spec_for(request.pipeline, venv=request.venv)
    print(f"bootstrap: {len(spec.steps)} steps on {len(request.target.hosts)} host(s), "
          f"MaxText {request.pipeline.maxtext_version}", file=out, flush=True)
    results = bootstrap_all(request.target, spec, stream=sys.stderr)
    failed = {h: r for h, r in results.items() if isinstance(r, (RemoteError, UnexpectedExit))}
    for host, result in results.items():
        if host in failed:
            print(f"✗ {host}: {_describe(result)}", file=out, flush=True)
        else:
            print(f"✓ {host}: {'installed ' + ', '.join(result.steps_run) if result.installed else 'already installed'}",
                  file=out, flush=True)
    summary = {
        "event": "summary", "phase": "bootstrap", "ok": not failed, "fingerprint": spec.fingerprint,
        "hosts": {h: ("failed" if h in failed else "installed" if r.installed else "unchanged") for h, r in results.items()},
    }
    print(json.dumps(summary), file=out, flush=True)
    return 0 if not failed else 1


def require_mounted(conn: Connection, path: str, wait_s: float) -> None:
    """Keep writes to the data disk, not to the boot disk's empty mount point (lost with the VM): wait for
    the startup script to mount it, or stop with what to check."""
    polls = max(1, int(wait_s))
    script = f"i=0; until mountpoint -q {shlex.quote(path)}; do [ $i -ge {polls} ] && exit 1; sleep 1; i=$((i+1)); done"
    if run(conn, script, warn=True, timeout=wait_s + conn.target.command_timeout).exited != 0:
        raise RemoteError(
            f"{conn.host}: nothing is mounted at {path} after {wait_s:g} s, so the model would be kept on the "
            "boot disk and lost with the VM; check the startup script (sudo journalctl -u google-startup-scripts)"
        )


def _place_token(conn: Connection, token: str | None) -> bool:
    """Put the HF token in a 0600 file on the host (over SFTP: never on a command line), if one was given
    here; either way, whether the host has one (placed now, or earlier by `put-secret`)."""
    if token:
        write_secret(conn, TOKEN_NAME, token)
        return True
    path = shlex.quote(f"{conn.target.state_dir}/secrets/{TOKEN_NAME}")
    return run(conn, f"test -s {path} && echo yes || true").stdout.strip() == "yes"


def write_secret(conn: Connection, name: str, value: str) -> str:
    """Store `value` as `<state_dir>/secrets/<name>` (0600 from the first byte, replaced atomically)."""
    directory = f"{conn.target.state_dir}/secrets"
    run(conn, f"mkdir -p -- {shlex.quote(directory)} && chmod 700 -- {shlex.quote(directory)}")
    sftp = conn.sftp()
    tmp = f"{directory}/.{name}.tmp"
    with sftp.open(tmp, "w") as f:
        f.chmod(0o600)
        f.write(value.encode())
    sftp.posix_rename(tmp, f"{directory}/{name}")
    return f"{directory}/{name}"


def _claim(conn: Connection, request: PhaseRequest, code_dir: str, has_token: bool) -> tuple[str, jobs.JobStatus]:
    """The job to follow: the latest attempt if it is running or succeeded, else a new attempt."""
    prefix = request.job_prefix
    listing = run(conn, f"ls -1 -- {shlex.quote(jobs.jobs_root(request.target))} 2>/dev/null; true").stdout.split()
    attempts = sorted(int(n.rsplit("-", 1)[1]) for n in listing if n.startswith(prefix + "-") and n.rsplit("-", 1)[1].isdigit())
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
        "--output-dir", request.output_dir, "--until", UNTIL[request.phase],
    ]
    if has_token:
        argv += ["--hf-token-file", f"../secrets/{TOKEN_NAME}"]
    # A job starts in its own directory: reach the code and the venv from the home directory.
    command = f"cd {_from_home(code_dir)} && exec {_from_home(request.venv)}/bin/python {shlex.join(argv)}"
    return job_id, jobs.start(conn, job_id, command, env={"PYTHONUNBUFFERED": "1"})


def _from_home(path: str) -> str:
    """A host path for a shell: absolute as given, relative ones under the remote user's home."""
    return shlex.quote(path) if path.startswith("/") else f'"$HOME"/{shlex.quote(path)}'


def _follow(request: PhaseRequest, job_id: str, state: jobs.JobStatus, out: TextIO, conn: Connection) -> int:
    printer = ProgressPrinter(out, quiet=state.state == "succeeded")
    log_path = f"{jobs.job_dir(request.target, job_id)}/log"
    print(f"{request.phase}: job {job_id} on {request.target.host} ({state.state}); "
          f"full log: {log_path if log_path.startswith('/') else '~/' + log_path}", file=out, flush=True)
    code = jobs.follow(request.target, job_id, printer.line, conn=conn)
    print(json.dumps(printer.summary or {"event": "summary", "ok": False, "error": "the job printed no summary"}),
          file=out, flush=True)
    return code


class ProgressPrinter:
    """Turns the workload's JSON-lines events (workload/events.py) into one readable line each."""

    def __init__(self, out: TextIO, *, quiet: bool = False):
        self.out, self.quiet = out, quiet
        self.summary: dict | None = None

    def line(self, text: str) -> None:
        try:
            event = json.loads(text)
        except json.JSONDecodeError:
            event = None
        if not isinstance(event, dict) or "event" not in event:
            return  # the job's stdout is only events; anything else stays in the job's log on the host
        if event["event"] == "summary":
            self.summary = event
            return
        rendered = _render(event)
        if rendered and not self.quiet:
            print(rendered, file=self.out, flush=True)


def _render(e: dict) -> str | None:
    kind, phase = e["event"], e.get("phase", "?")
    if kind == "phase":
        status = e.get("status")
        if status == "start":
            return f"▶ {phase}"
        if status == "done":
            return f"✓ {phase} done in {e.get('seconds', 0):.0f} s"
        if status == "skipped":
            return f"· {phase} skipped: {e.get('reason', 'already done')}"
        if status == "failed":
            return f"✗ {phase} failed after {e.get('seconds', 0):.0f} s: {e.get('cause', '')}"
    if kind == "resume":
        return f"↻ {phase} resumes from step {e.get('from_step')}"
    if kind == "step":
        parts = [f"{phase} step {e.get('step')}/{e.get('steps')}"]
        if e.get("loss") is not None:
            parts.append(f"loss {e['loss']:.4f}")
        if e.get("step_seconds") is not None:
            parts.append(f"{e['step_seconds']:.2f} s/step")
        if e.get("tokens_per_s_per_device") is not None:
            parts.append(f"{e['tokens_per_s_per_device']:.0f} tokens/s/device")
        if e.get("eta_s") is not None:
            parts.append(f"ETA {_duration(e['eta_s'])}")
        return " · ".join(parts)
    if kind == "error":
        tail = "\n".join(f"    {line}" for line in e.get("tail", [])[-10:])
        return f"✗ {phase}: {e.get('cause')}" + (f"\n  log tail ({e.get('log')}):\n{tail}" if tail else "")
    return None


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    return f"{seconds // 3600} h {seconds % 3600 // 60} min" if seconds >= 3600 else f"{seconds // 60} min {seconds % 60} s"


def _describe(error: BaseException) -> str:
    if isinstance(error, UnexpectedExit):
        return f"a bootstrap step exited {error.result.exited}; its output is above"
    return str(error)
