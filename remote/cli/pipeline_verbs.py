"""The pipeline's verbs of `python -m remote` (remote/pipeline), each what a `pulumi up` task runs: bootstrap the
hosts, start the run, run a phase, publish the kept model, put a secret on every host."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

from remote.cli.common import print_json, target_from, verb
from remote.pipeline import capacity, outcome, phase, publish, start_run, task_log
from remote.pipeline.bootstrap.scheduler import bootstrap_all
from remote.pipeline.bootstrap.seed import spec_for
from remote.pipeline.bootstrap.spec import BootstrapSpec
from remote.pipeline.request import PhaseRequest
from remote.pipeline.target import PipelineTarget
from remote.ssh.errors import EXIT_FAILED, EXIT_OK, EXIT_SOME_HOSTS_FAILED, BadInput, RemoteError, describe
from remote.ssh.secrets import write_secret_everywhere
from remote.ssh.wait import NEW_VM_DEADLINE_S
from workload.core.config import PipelineConfig
from workload.core.contract import (
    HF_TOKEN_SECRET,
    HF_WRITE_TOKEN_SECRET,
    KEPT_DIR,
    MOUNT_POINT,
    PHASES,
    PIPELINE_ENV,
    PUBLISH_ENV,
    RUN_TASK,
    SCRATCH_DIR,
    TARGET_ENV,
)


def await_hosts(target: PipelineTarget) -> None:
    """Returns once the target's hosts exist: a flex-start slice's come when its group, resized to them, finds the
    capacity."""
    if target.flex_start_group is not None:
        capacity.fill_group(target.flex_start_group, 1 + len(target.workers))


# ---- bootstrap
def add_bootstrap(verbs, common) -> None:
    p = verb(
        verbs,
        "bootstrap",
        common,
        "Install MaxText on every host (seed step 3), once.",
        "Runs apt beside uv, a Python 3.12 venv (~/maxtext_venv) and the pinned maxtext[tpu-post-train], on\n"
        "all hosts in parallel. A host already holding the same installation is checked in one round trip\n"
        "and left alone; an interrupted run resumes at the steps it stopped in. Needs the target, and the\n"
        "pipeline settings (--config) or an explicit spec (--spec). Leaves <state_dir>/bootstrap/ on each host.",
    )
    p.add_argument("--config", type=Path, metavar="JSON", help="pipeline settings (stack keys, as in Pulumi config)")
    p.add_argument(
        "--spec",
        type=Path,
        metavar="JSON",
        help='explicit install steps instead of --config; a step\'s "after" lists the steps it needs '
        "(unset: the one before it)",
    )
    _add_deadline(p)
    p.set_defaults(func=_bootstrap)


def _bootstrap(args) -> int:
    target = target_from(args)
    if args.spec and args.config:
        raise BadInput("give --config or --spec, not both")
    if args.spec:
        spec = BootstrapSpec.from_json(_read(args.spec))
    else:
        config = PipelineConfig.from_mapping(_read_json(args.config)) if args.config else PipelineConfig()
        spec = spec_for(config, work_dir=target.profile.scratch_dir, state_dir=target.state_dir)
    results = bootstrap_all(
        target, spec, stream=sys.stderr, deadline_s=args.deadline, hf_token=os.environ.get("HF_TOKEN") or None
    )
    summary: dict[str, dict[str, object]] = {}
    failed: list[str] = []
    for host, result in results.items():
        if isinstance(result, BaseException):
            failed.append(host)
            print(f"error: {describe(result, host)}", file=sys.stderr)
            summary[host] = {"error": describe(result, host)}
        else:
            summary[host] = {"installed": result.installed, "steps_run": list(result.steps_run)}
    print_json({"fingerprint": spec.fingerprint, "hosts": summary})
    if not failed:
        return EXIT_OK
    if len(results) == 1:
        error = results[failed[0]]
        return error.exit_code if isinstance(error, RemoteError) else EXIT_FAILED
    return EXIT_SOME_HOSTS_FAILED


# ---- phase
def add_phase(verbs, common) -> None:
    p = verb(
        verbs,
        "phase",
        common,
        "Run one pipeline phase on the VM and follow it to the end.",
        "What each `pulumi up` post-deploy task runs. bootstrap installs MaxText and the eval venv; convert,\n"
        "train, export (with verify and keep) and eval (the benchmarks, docs/eval.md) ship workload/ to the\n"
        "host and follow their part of the run that\n"
        "`start-run` started there (or start it, where it failed or runs other settings), printing one line\n"
        "of progress per event; the last stdout line is a JSON summary. Interrupted, the job goes on:\n"
        "running the same phase again re-attaches to it, and a finished one is not run again.\n"
        "A target with workers is a slice: bootstrap runs on every host; the others run the same job on every\n"
        "worker (--worker-id I --worker-hostnames H0,… added; worker 0 = host, the one followed), and one\n"
        "worker's failure cancels the job on all the others and is named in the summary.\n"
        f"Needs ${PIPELINE_ENV} (the settings this phase depends on, as JSON) and the target, whose\n"
        "profile says where scratch and kept outputs go and how to install (default: a GCE VM, the seed's\n"
        f"install, {SCRATCH_DIR}, {KEPT_DIR} once {MOUNT_POINT} is mounted); optional $HF_TOKEN\n"
        "(stored on the host in a 0600 file; never on a command line).\n"
        "Leaves on the host: <state_dir>/code, jobs/, runs/, secrets/; the work and output directories.",
    )
    p.add_argument("phase", choices=PHASES)
    p.set_defaults(func=_phase)


def _phase(args) -> int:
    try:
        target = target_from(args)
    except BaseException as error:  # every way a phase ends prints its summary last; main says the rest
        print_json(outcome.failed(args.phase, outcome.reason_for(error)))
        raise
    # A `pulumi up` task's progress goes to its whole log, and stdout keeps what must stay readable (task_log.py).
    with task_log.progress_of(args.phase, target.task_logs, sys.stdout) as out:
        try:
            request = PhaseRequest.from_env(args.phase, target, os.environ)
            await_hosts(request.target)
            return phase.run_phase(request, out, hf_token=os.environ.get("HF_TOKEN") or None)
        except BaseException as error:
            print(
                json.dumps(outcome.failed(args.phase, outcome.reason_for(error)), sort_keys=True), file=out, flush=True
            )
            raise


# ---- start-run
def add_start_run(verbs, common) -> None:
    p = verb(
        verbs,
        "start-run",
        common,
        "Start the run on the VM with every setting, unless it already runs them.",
        "What the `…-run` task of `pulumi up` runs after bootstrap, before the phases. Ships workload/ and\n"
        "places the token as a phase does, then takes the latest attempt of the run on the host where it runs\n"
        "every step with these settings and is running or has succeeded; otherwise it stops that attempt where\n"
        "it still runs and starts the next (`python -m workload run --until eval`, a detached job; on a slice,\n"
        "on every worker). Returns at once: the phases follow the run. The last stdout line is a JSON summary.\n"
        f"Needs ${PIPELINE_ENV} (every pipeline setting, as JSON) and the target; optional $HF_TOKEN\n"
        "(stored on the host in a 0600 file; never on a command line).\n"
        "Leaves on the host: <state_dir>/code, jobs/, runs/, secrets/; the work and output directories.",
    )
    p.set_defaults(func=_start_run)


def _start_run(args) -> int:
    try:
        request = start_run.request_from_env(target_from(args), os.environ)
        await_hosts(request.target)
        return start_run.start_run(request, sys.stdout, hf_token=os.environ.get("HF_TOKEN") or None)
    except BaseException as error:  # as a phase: its summary last on every path
        print_json(outcome.failed(RUN_TASK, outcome.reason_for(error)))
        raise


# ---- publish
def add_publish(verbs, common) -> None:
    p = verb(
        verbs,
        "publish",
        common,
        "Publish the kept model to Cloud Storage and/or the Hugging Face Hub.",
        "What the `…-publish` task of `pulumi up` runs after the last phase. Finds the kept model where\n"
        "export left it (the profile's kept dir and the run's name, from the pipeline's settings), ships\n"
        "workload/ and runs `python -m workload.publish` on the main host as a detached job, printing one line\n"
        "of progress per event; the last stdout line is a JSON summary. The quality gate reads the kept eval\n"
        "report first (docs/publishing.md). The same model again sends nothing; an interrupted publish\n"
        "resumes. HF_ENDPOINT and STORAGE_EMULATOR_HOST, when set, go to the job.\n"
        f"Needs ${TARGET_ENV}, ${PIPELINE_ENV} (the last phase's settings) and ${PUBLISH_ENV}\n"
        '(JSON: "gcs": gs://…, "hub": OWNER/NAME, "public": true|false, "evalGate": block|warn|off,\n'
        '"evalMargin": points); $HF_WRITE_TOKEN for the Hub\n'
        "(stored on the host in a 0600 file; never on a command line).\n"
        "Leaves on the host: <state_dir>/code, jobs/, secrets/.",
    )
    p.set_defaults(func=_publish)


def _publish(args) -> int:
    if not os.environ.get(TARGET_ENV):
        raise BadInput(f"${TARGET_ENV} is not set: give the target as JSON")
    request = PhaseRequest.from_env("export", target_from(args), os.environ)
    await_hosts(request.target)
    return publish.publish(request, publish.destinations(os.environ), sys.stdout, os.environ)


# ---- put-secret
def add_put_secret(verbs, common) -> None:
    p = verb(
        verbs,
        "put-secret",
        common,
        "Store a secret read from stdin in a 0600 file on every host.",
        "The value travels over SFTP only (never a command line, never a log) into\n"
        "<state_dir>/secrets/NAME on the main host and every worker, all at once; `phase` hands the HF\n"
        "token's file to the workload. Prints nothing secret; a host that failed is named on stderr.",
    )
    p.add_argument("name", choices=(HF_TOKEN_SECRET, HF_WRITE_TOKEN_SECRET))
    _add_deadline(p)
    p.set_defaults(func=_put_secret)


def _put_secret(args) -> int:
    try:
        value = sys.stdin.buffer.read().decode("utf-8").strip()
    except UnicodeDecodeError:
        raise BadInput(f"put-secret {args.name}: stdin is not UTF-8 text; pipe the secret in as text") from None
    if not value:
        raise BadInput(f"put-secret {args.name}: stdin was empty; pipe the secret in")
    target = target_from(args)
    await_hosts(target)
    results = write_secret_everywhere(target, args.name, value, args.deadline)
    failed = {host: result for host, result in results.items() if isinstance(result, RemoteError)}
    for host, result in results.items():
        if host in failed:
            print(f"error: {describe(failed[host], host)}", file=sys.stderr)
        else:
            print(f"stored {args.name} on {host} at {result} (mode 0600)")
    if not failed:
        return EXIT_OK
    return next(iter(failed.values())).exit_code if len(results) == 1 else EXIT_SOME_HOSTS_FAILED


def _add_deadline(p: argparse.ArgumentParser) -> None:
    """For verbs that can be the first contact with a VM `pulumi up` has just created."""
    p.add_argument(
        "--deadline",
        type=float,
        default=NEW_VM_DEADLINE_S,
        metavar="S",
        help=f"wait up to S seconds for each host to answer SSH and accept the key (default {NEW_VM_DEADLINE_S:g})",
    )


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise BadInput(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise BadInput(f"{path} is not UTF-8 text; give a JSON file") from None


def _read_json(path: Path):
    try:
        return json.loads(_read(path))
    except json.JSONDecodeError as e:
        raise BadInput(f"{path} is not valid JSON ({e.msg}, line {e.lineno})") from None
