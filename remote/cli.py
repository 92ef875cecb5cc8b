"""`python -m remote VERB …`: the remote layer from the shell (and from Pulumi's local.Command).

Thin over the library: each verb is a `_add_<verb>` that declares its flags and a `_<verb>` that runs it.
To add a verb, write both and list `_add_<verb>` in VERBS.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

from remote.exit_status import exit_status
from remote.pipeline import capacity, outcome, phase, publish
from remote.pipeline.bootstrap.scheduler import bootstrap_all
from remote.pipeline.bootstrap.seed import spec_for
from remote.pipeline.bootstrap.spec import BootstrapSpec
from remote.pipeline.request import PhaseRequest
from remote.pipeline.target import PipelineTarget
from remote.ssh import flags, group, jobs
from remote.ssh.connection import connect, env_prefix, run
from remote.ssh.errors import (
    EXIT_AUTH,
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_HOST_KEY,
    EXIT_JOB_LOST,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_SOME_HOSTS_FAILED,
    EXIT_UNREACHABLE,
    EXIT_VERIFY,
    BadInput,
    JobNotFound,
    RemoteError,
    describe,
)
from remote.ssh.secrets import write_secret_everywhere
from remote.ssh.sync import fetch, local_names
from remote.ssh.wait import NEW_VM_DEADLINE_S, wait_for_ssh
from workload.core.config import PipelineConfig
from workload.core.contract import (
    EXIT_UNEXPECTED,
    HF_TOKEN_SECRET,
    HF_WRITE_TOKEN_SECRET,
    KEPT_DIR,
    MOUNT_POINT,
    PHASES,
    PIPELINE_ENV,
    PUBLISH_ENV,
    SCRATCH_DIR,
    TARGET_ENV,
)
from workload.core.one_line_parser import OneLineParser

EXIT_CODES = f"""exit codes (the same for every verb):
  {EXIT_OK}   done
  {EXIT_FAILED}   a remote command or bootstrap step failed (`run` returns the command's own code instead)
  {EXIT_BAD_INPUT}  bad input: target, flag, job id or spec (the message names it and the fix)
  {EXIT_HOST_KEY}  host key refused: unknown (trust-on-first-use off) or CHANGED since it was pinned
  {EXIT_NOT_FOUND}  no such job, or a remote file to fetch is missing
  {EXIT_AUTH}  the server refused the key
  {EXIT_UNREACHABLE}  unreachable: no answer within the connect/command timeouts, or refused
  {EXIT_JOB_LOST}  `follow`: the job ended without an exit code (killed, host rebooted, cancelled)
  {EXIT_VERIFY}  `fetch`: a file's size or sha256 did not match
  {EXIT_SOME_HOSTS_FAILED}  `run --all-hosts` / `bootstrap` / `put-secret`: some hosts failed (each is named on stderr)
  {EXIT_UNEXPECTED}  an unexpected error (a bug): stderr names the log file holding its traceback
  130 interrupted (Ctrl-C)
  `follow` and `publish` otherwise exit with the job's own exit code."""

TARGET_HELP = f"""The target comes from ${TARGET_ENV} (JSON with the fields host, user, key_path, known_hosts, port,
gateway, trust_on_first_use, workers, connect_timeout, command_timeout, keepalive_s, state_dir), and
any target flag overrides the field of the same name."""

log = logging.getLogger("remote")


class _Parser(OneLineParser):
    bad_input_exit = EXIT_BAD_INPUT


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr, format="remote: %(message)s", level=logging.WARNING if args.quiet else logging.INFO
    )
    logging.getLogger("paramiko").setLevel(logging.CRITICAL)  # its tracebacks would repeat our one-line errors
    return exit_status(
        lambda: args.func(args), interrupted="remote jobs keep running; `follow` them again", secrets=_secrets(args)
    )


def _secrets(args) -> list[str | None]:
    """What must never reach a log: the HF tokens and every --secret-env value."""
    names = ["HF_TOKEN", "HF_WRITE_TOKEN", *getattr(args, "secret_env", [])]
    return [os.environ.get(name) for name in names]


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="python -m remote",
        description="Reach the training VM over SSH: wait for it, bootstrap it, run commands and detached jobs, "
        "follow their logs and fetch their results. Host keys are pinned; nothing is ever run twice "
        "by a retry.",
        epilog=f"{TARGET_HELP}\n\n{EXIT_CODES}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")
    common = _common_flags()
    for add in VERBS:
        add(verbs, common)
    return parser


def _verb(verbs, name: str, common, summary: str, details: str) -> argparse.ArgumentParser:
    return verbs.add_parser(
        name,
        parents=[common],
        help=summary,
        description=f"{summary}\n\n{details}",
        epilog=f"{TARGET_HELP}\n\n{EXIT_CODES}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )


def _common_flags() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument("-q", "--quiet", action="store_true", help="only warnings and errors on stderr")
    t = common.add_argument_group("target (override $" + TARGET_ENV + ")")
    t.add_argument("--host", help="address, or instance name when --gateway is an IAP tunnel")
    t.add_argument("--port", type=flags.port)
    t.add_argument("--user")
    t.add_argument("--key", dest="key_path", metavar="PATH", help="private key file")
    t.add_argument("--known-hosts", metavar="PATH", help="file with the pinned host keys")
    t.add_argument(
        "--gateway", metavar="PROXYCOMMAND", help="e.g. gcloud compute start-iap-tunnel %%h %%p --listen-on-stdin …"
    )
    t.add_argument(
        "--trust-on-first-use",
        action="store_true",
        default=None,
        help="record an unknown host key instead of refusing it (only over an authenticated link)",
    )
    t.add_argument("--worker", dest="workers", action="append", metavar="HOST", help="another host (repeat)")
    t.add_argument("--connect-timeout", type=flags.positive_seconds, metavar="S")
    t.add_argument("--command-timeout", type=flags.positive_seconds, metavar="S")
    t.add_argument("--state-dir", metavar="PATH", help="on the host, for jobs and bootstrap state (default .tpu-sft)")
    return common


def target_from(args) -> PipelineTarget:
    raw = os.environ.get(TARGET_ENV)
    fields = PipelineTarget.from_json(raw).__dict__.copy() if raw else {}
    for name in (
        "host",
        "port",
        "user",
        "key_path",
        "known_hosts",
        "gateway",
        "trust_on_first_use",
        "workers",
        "connect_timeout",
        "command_timeout",
        "state_dir",
    ):
        value = getattr(args, name)
        if value is not None:
            fields[name] = value
    return PipelineTarget.from_mapping(fields)


def await_hosts(target: PipelineTarget) -> None:
    """Returns once the target's hosts exist: a flex-start slice's come when its group, resized to them, finds the
    capacity."""
    if target.flex_start_group is not None:
        capacity.fill_group(target.flex_start_group, 1 + len(target.workers))


def _print_json(value) -> None:
    print(json.dumps(value, sort_keys=True), flush=True)


# ---- wait
def _add_wait(verbs, common) -> None:
    p = _verb(
        verbs,
        "wait",
        common,
        "Wait until every host answers SSH.",
        "Retries with backoff (a new VM first refuses connections, then keys) until --deadline. Needs the\n"
        "target. Leaves nothing on the hosts.",
    )
    p.add_argument(
        "--deadline",
        type=flags.positive_seconds,
        default=300.0,
        metavar="S",
        help="give up after S seconds (default 300)",
    )
    p.set_defaults(func=_wait)


def _wait(args) -> int:
    target = target_from(args)
    start = time.monotonic()
    for host in target.hosts:
        wait_for_ssh(target, max(0.1, args.deadline - (time.monotonic() - start)), host).close()
    _print_json({"hosts": list(target.hosts), "seconds": round(time.monotonic() - start, 2)})
    return EXIT_OK


# ---- bootstrap
def _add_bootstrap(verbs, common) -> None:
    p = _verb(
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
    _print_json({"fingerprint": spec.fingerprint, "hosts": summary})
    if not failed:
        return EXIT_OK
    if len(results) == 1:
        error = results[failed[0]]
        return error.exit_code if isinstance(error, RemoteError) else EXIT_FAILED
    return EXIT_SOME_HOSTS_FAILED


# ---- run
def _add_run(verbs, common) -> None:
    p = _verb(
        verbs,
        "run",
        common,
        "Run a short command in the foreground and show its output.",
        "For anything long, use `start` + `follow`: a foreground command dies with its connection.\n"
        "Exits with the command's own exit code (one host); with --all-hosts, 0 or 73.",
    )
    p.add_argument("command", help="a /bin/sh command line")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="exported, quoted (repeat)")
    p.add_argument("--all-hosts", action="store_true", help="run on the main host and every worker in parallel")
    p.add_argument("--timeout", type=flags.positive_seconds, metavar="S", help="default: the target's command_timeout")
    p.set_defaults(func=_run)


def _run(args) -> int:
    target, env = target_from(args), _env_pairs(args.env)
    if args.all_hosts:
        results = group.run_all(target, args.command, env=env, timeout=args.timeout)
        for result in results.values():
            for line in result.stdout.splitlines():
                print(f"{result.host}: {line}")
            status = "ok" if result.ok else (result.error or f"exited {result.exit_code}")
            print(f"{result.host}: {status}", file=sys.stderr)
        return EXIT_OK if all(r.ok for r in results.values()) else EXIT_SOME_HOSTS_FAILED
    with connect(target) as conn:
        return run(
            conn, args.command, env=env, timeout=args.timeout, warn=True, stream=sys.stdout, err_stream=sys.stderr
        ).exited


# ---- start
def _add_start(verbs, common) -> None:
    p = _verb(
        verbs,
        "start",
        common,
        "Start a detached job that survives disconnection.",
        "The job runs under setsid/nohup in <state_dir>/jobs/JOB_ID/ on the main host (log, pid, exit code).\n"
        "If JOB_ID already exists (running or finished), nothing is started and its state is printed.\n"
        "Secrets: --secret-env NAME copies the value of NAME from YOUR environment into a 0600 file on the\n"
        "host that the job reads and deletes; it never appears on a command line or in the log.\n"
        "Prints the job's state as JSON.",
    )
    p.add_argument("job_id", type=flags.job_id)
    p.add_argument("command", help="a /bin/sh command line")
    p.add_argument("--env", action="append", default=[], metavar="NAME=VALUE", help="exported, quoted (repeat)")
    p.add_argument("--secret-env", action="append", default=[], metavar="NAME", help="pass $NAME as a secret (repeat)")
    p.add_argument("--cwd", metavar="DIR", help="working directory on the host (default: home)")
    p.set_defaults(func=_start)


def _start(args) -> int:
    target, env = target_from(args), _env_pairs(args.env)
    secret_env = {}
    for name in args.secret_env:
        if name not in os.environ:
            raise BadInput(f"--secret-env {name}: ${name} is not set in this environment")
        secret_env[name] = os.environ[name]
    env_prefix(secret_env)  # the names, checked before connecting
    if not args.command.strip():
        raise BadInput("the job's command is empty; give a /bin/sh command line")
    with connect(target) as conn:
        state = jobs.start(conn, args.job_id, args.command, env=env, secret_env=secret_env, cwd=args.cwd)
    _print_json(state.to_json())
    return EXIT_OK


# ---- status
def _add_status(verbs, common) -> None:
    p = _verb(
        verbs,
        "status",
        common,
        "Print a job's state as JSON.",
        "state is running, succeeded, failed, died (gone without exit code) or cancelled. Exits 66 if\n"
        "there is no such job. Changes nothing.",
    )
    p.add_argument("job_id", type=flags.job_id)
    p.set_defaults(func=_status)


def _status(args) -> int:
    with connect(target_from(args)) as conn:
        state = jobs.status(conn, args.job_id)
    if state.state == "absent":
        raise JobNotFound(f"no job {args.job_id} on {conn.host}")
    _print_json(state.to_json())
    return EXIT_OK


# ---- follow
def _add_follow(verbs, common) -> None:
    p = _verb(
        verbs,
        "follow",
        common,
        "Stream a job's log until it ends; exit with its exit code.",
        "Log lines go to stdout as they arrive, progress and reconnection notices to stderr, then one\n"
        "JSON line with the outcome. A dropped connection is retried with backoff; the job is never\n"
        "touched, so stopping `follow` (Ctrl-C) leaves it running. Leaves nothing on the host.",
    )
    p.add_argument("job_id", type=flags.job_id)
    p.add_argument("--offset", type=flags.byte_offset, default=0, metavar="BYTES", help="start at this log byte offset")
    p.add_argument(
        "--reconnect-deadline",
        type=flags.positive_seconds,
        default=600.0,
        metavar="S",
        help="give up after S seconds without a working connection (default 600)",
    )
    p.add_argument(
        "--heartbeat",
        type=flags.positive_seconds,
        default=30.0,
        metavar="S",
        help="while the log is silent, say so on stderr every S seconds (default 30)",
    )
    p.set_defaults(func=_follow)


def _follow(args) -> int:
    target = target_from(args)
    start = last_output = time.monotonic()

    def on_line(line: str) -> None:
        nonlocal last_output
        last_output = time.monotonic()
        print(line, flush=True)

    def on_status(state: jobs.JobStatus) -> None:
        nonlocal last_output
        if state.state == "running" and time.monotonic() - last_output >= args.heartbeat:
            last_output = time.monotonic()
            log.info("%s still running after %.0f s (log %d bytes)", args.job_id, last_output - start, state.log_size)

    try:
        code = jobs.follow(
            target,
            args.job_id,
            on_line,
            args.offset,
            wait_s=min(2.0, args.heartbeat),
            reconnect_deadline_s=args.reconnect_deadline,
            on_status=on_status,
        )
    except RemoteError as e:
        _print_json({"job": args.job_id, "error": str(e), "exit_code": None})
        raise
    _print_json({"job": args.job_id, "exit_code": code, "seconds": round(time.monotonic() - start, 1)})
    return code


# ---- cancel
def _add_cancel(verbs, common) -> None:
    p = _verb(
        verbs,
        "cancel",
        common,
        "Stop a running job (its whole process group).",
        "Sends SIGTERM, then SIGKILL after --grace. A finished job is left as it is. The job directory\n"
        "stays (with a `cancelled` mark), so the job id is not reused. Prints the final state as JSON.",
    )
    p.add_argument("job_id", type=flags.job_id)
    p.add_argument(
        "--grace",
        type=flags.grace_seconds,
        default=10.0,
        metavar="S",
        help="seconds between SIGTERM and SIGKILL (0: SIGKILL at once)",
    )
    p.set_defaults(func=_cancel)


def _cancel(args) -> int:
    with connect(target_from(args)) as conn:
        _print_json(jobs.cancel(conn, args.job_id, grace_s=args.grace).to_json())
    return EXIT_OK


# ---- fetch
def _add_fetch(verbs, common) -> None:
    p = _verb(
        verbs,
        "fetch",
        common,
        "Download files from the main host, verified by size and sha256.",
        "Each file lands in --to under its base name, written atomically; one that is already there with\n"
        "the same content is not downloaded again. Prints what was fetched as JSON.",
    )
    p.add_argument("paths", nargs="+", metavar="REMOTE_PATH")
    p.add_argument("--to", required=True, type=Path, metavar="DIR", help="local directory")
    p.set_defaults(func=_fetch)


def _fetch(args) -> int:
    target = target_from(args)
    local_names(args.paths)  # before any connection: wrong input must not cost a connection
    _usable_local_dir(args.to)
    with connect(target) as conn:
        fetched = fetch(conn, args.paths, args.to)
    _print_json([asdict(f) for f in fetched])
    return EXIT_OK


# ---- phase
def _add_phase(verbs, common) -> None:
    p = _verb(
        verbs,
        "phase",
        common,
        "Run one pipeline phase on the VM and follow it to the end.",
        "What each `pulumi up` post-deploy task runs. bootstrap installs MaxText; convert, train and export\n"
        "(export includes verify and keep) ship workload/ to the host and run it as a detached job, printing\n"
        "one line of progress per event; the last stdout line is a JSON summary. Interrupted, the job goes on:\n"
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
        request = PhaseRequest.from_env(args.phase, target_from(args), os.environ)
        await_hosts(request.target)
        return phase.run_phase(request, sys.stdout, hf_token=os.environ.get("HF_TOKEN") or None)
    except BaseException as error:  # every way a phase ends prints its summary last; main says the rest
        _print_json(outcome.failed(args.phase, outcome.reason_for(error)))
        raise


# ---- publish
def _add_publish(verbs, common) -> None:
    p = _verb(
        verbs,
        "publish",
        common,
        "Publish the kept model to Cloud Storage and/or the Hugging Face Hub.",
        "What the `…-publish` task of `pulumi up` runs after the export phase. Finds the kept model where\n"
        "export left it (the profile's kept dir and the run's name, from the export phase's settings), ships\n"
        "workload/ and runs `python -m workload.publish` on the main host as a detached job, printing one line\n"
        "of progress per event; the last stdout line is a JSON summary. The same model again sends nothing;\n"
        "an interrupted publish resumes. HF_ENDPOINT and STORAGE_EMULATOR_HOST, when set, go to the job.\n"
        f"Needs ${TARGET_ENV}, ${PIPELINE_ENV} (the export phase's settings) and ${PUBLISH_ENV}\n"
        '(JSON: "gcs": gs://…, "hub": OWNER/NAME, "public": true|false); $HF_WRITE_TOKEN for the Hub\n'
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
def _add_put_secret(verbs, common) -> None:
    p = _verb(
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


VERBS = (
    _add_wait,
    _add_bootstrap,
    _add_run,
    _add_start,
    _add_status,
    _add_follow,
    _add_cancel,
    _add_fetch,
    _add_phase,
    _add_publish,
    _add_put_secret,
)


def _add_deadline(p: argparse.ArgumentParser) -> None:
    """For verbs that can be the first contact with a VM `pulumi up` has just created."""
    p.add_argument(
        "--deadline",
        type=float,
        default=NEW_VM_DEADLINE_S,
        metavar="S",
        help=f"wait up to S seconds for each host to answer SSH and accept the key (default {NEW_VM_DEADLINE_S:g})",
    )


def _env_pairs(pairs: list[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise BadInput(f"--env {name!r}: expected NAME=VALUE")
        env[name] = value
    env_prefix(env)  # the names, checked before connecting
    return env


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError as e:
        raise BadInput(f"cannot read {path}: {e.strerror}") from None
    except UnicodeDecodeError:
        raise BadInput(f"{path} is not UTF-8 text; give a JSON file") from None


def _usable_local_dir(path: Path) -> None:
    """`path` is, or can be made, a directory this process can write into."""
    if path.exists() and not path.is_dir():
        raise BadInput(f"--to {path} is not a directory; give a directory (it is created if missing)")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise BadInput(f"--to {path}: cannot create it ({e.strerror}); give a directory you can write to") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise BadInput(f"--to {path} is not writable; give a directory you can write to")


def _read_json(path: Path):
    try:
        return json.loads(_read(path))
    except json.JSONDecodeError as e:
        raise BadInput(f"{path} is not valid JSON ({e.msg}, line {e.lineno})") from None
