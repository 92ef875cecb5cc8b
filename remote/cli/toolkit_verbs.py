"""The SSH toolkit's verbs of `python -m remote` (remote/ssh): wait for the hosts, run a command, start a detached
job, read its status, follow it, cancel it, fetch files. None of them knows the pipeline."""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import asdict
from pathlib import Path

from remote.cli.common import print_json, target_from, verb
from remote.ssh import flags, group, jobs
from remote.ssh.connection import connect, env_prefix, run
from remote.ssh.errors import EXIT_OK, EXIT_SOME_HOSTS_FAILED, BadInput, JobNotFound, RemoteError
from remote.ssh.sync import fetch, local_names
from remote.ssh.wait import wait_for_ssh

log = logging.getLogger("remote")


# ---- wait
def add_wait(verbs, common) -> None:
    p = verb(
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
    print_json({"hosts": list(target.hosts), "seconds": round(time.monotonic() - start, 2)})
    return EXIT_OK


# ---- run
def add_run(verbs, common) -> None:
    p = verb(
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
def add_start(verbs, common) -> None:
    p = verb(
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
    print_json(state.to_json())
    return EXIT_OK


# ---- status
def add_status(verbs, common) -> None:
    p = verb(
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
    print_json(state.to_json())
    return EXIT_OK


# ---- follow
def add_follow(verbs, common) -> None:
    p = verb(
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
        print_json({"job": args.job_id, "error": str(e), "exit_code": None})
        raise
    print_json({"job": args.job_id, "exit_code": code, "seconds": round(time.monotonic() - start, 1)})
    return code


# ---- cancel
def add_cancel(verbs, common) -> None:
    p = verb(
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
        print_json(jobs.cancel(conn, args.job_id, grace_s=args.grace).to_json())
    return EXIT_OK


# ---- fetch
def add_fetch(verbs, common) -> None:
    p = verb(
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
    print_json([asdict(f) for f in fetched])
    return EXIT_OK


def _env_pairs(pairs: list[str]) -> dict[str, str]:
    env = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise BadInput(f"--env {name!r}: expected NAME=VALUE")
        env[name] = value
    env_prefix(env)  # the names, checked before connecting
    return env


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
