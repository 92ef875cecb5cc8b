"""Detached jobs: processes on the host that outlive the SSH connection that started them.

A job lives in `<state_dir>/jobs/<job_id>/` on the host:
  job.sh      the command, with its (quoted) environment and working directory
  run.sh      the wrapper: records boot_id and pid, runs job.sh, writes `exit` atomically (tmp + mv)
  secret.env  0600, uploaded over SFTP, sourced then deleted by job.sh (never on a command line)
  log         stdout and stderr of the job; followed by byte offset
  pid         "PID STARTTIME" of the wrapper, which leads its own session and process group; when the job's
              command ends, the wrapper kills whatever else is left in its session before writing `exit`, so a
              job ends with its main process, whatever its children do
  boot_id     the kernel boot id at start: a reboot means the job died
  exit        the exit code, present only once the job has finished
  cancelled   present once `cancel` was asked
The directory appears atomically (staged, then renamed into place with `mv -T`, which fails when the job
already exists), so two starters can never launch the same job twice.
"""

from __future__ import annotations

import base64
import logging
import re
import secrets as _secrets
import shlex
import time
from dataclasses import asdict, dataclass
from typing import Callable, Mapping

from remote.ssh.connection import Connection, connect, env_prefix, run
from remote.ssh.errors import BadInput, JobLost, JobNotFound, Unreachable
from remote.ssh.target import Target
from workload.core.contract import JOBS_DIR
from workload.launch import exit_reason

log = logging.getLogger("remote")

JOB_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
TERMINAL = ("succeeded", "failed", "died", "cancelled")
_CHUNK = 1 << 20  # log bytes per poll

# `st DIR` prints key=value lines describing a job. Liveness is read BEFORE `exit`: the wrapper writes
# `exit` before it ends, so "not alive and no exit" really means the job died. A zombie counts as dead
# (`kill -0` would say alive), and so does a pid whose start time differs (pid reuse) or a new boot.
_STATUS_FN = r"""
started() {
  # A job appears (mv -T) a moment before its wrapper records its pid: give a starting job 2 s.
  i=0; while [ -d "$1" ] && [ ! -s "$1/pid" ] && [ $i -lt 40 ]; do sleep 0.05; i=$((i+1)); done
}
alive() {
  [ -s "$1/pid" ] || return 1
  read -r pid start < "$1/pid"
  set -- $(cut -d' ' -f3,22 "/proc/$pid/stat" 2>/dev/null)
  [ "${1:-Z}" != Z ] && [ "${2:-}" = "$start" ]
}
signal_session() {
  # Send signal $1 (0: only look) to every live process of session $2 but this shell; true if there was one.
  sig=$1 sid=$2 found=1
  for p in /proc/[0-9]*; do
    [ "${p#/proc/}" = "$$" ] && continue
    read -r stat 2>/dev/null < "$p/stat" || continue
    set -- ${stat##*) }  # after the command name, which may hold spaces: state ppid pgrp session …
    [ "${4:-}" = "$sid" ] && [ "$1" != Z ] && kill -"$sig" "${p#/proc/}" 2>/dev/null && found=0
  done
  return $found
}
same_boot() {
  [ "$(cat "$1/boot_id" 2>/dev/null)" = "$(cat /proc/sys/kernel/random/boot_id)" ]
}
st() {
  d=$1
  if [ ! -d "$d" ]; then echo state=absent; return 0; fi
  started "$d"
  live=0 boot=same pid=
  if [ -s "$d/pid" ]; then read -r pid start < "$d/pid"; fi
  if ! same_boot "$d"; then boot=changed; elif alive "$d"; then live=1; fi
  echo state=present
  echo "pid=$pid"; echo "alive=$live"; echo "boot=$boot"
  echo "exit=$(cat "$d/exit" 2>/dev/null)"
  if [ -e "$d/cancelled" ]; then echo cancelled=1; fi
  echo "size=$(stat -c %s "$d/log" 2>/dev/null || echo 0)"
}
"""

_RUN_SH = (
    _STATUS_FN
    + """
# Written by remote.ssh.jobs: runs job.sh and records what `status` needs to tell running, finished and dead apart.
cat /proc/sys/kernel/random/boot_id > boot_id
echo "$$ $(cut -d' ' -f22 /proc/$$/stat)" > pid.tmp && mv pid.tmp pid
sh ./job.sh
code=$?
signal_session KILL $$
echo $code > exit.tmp && mv exit.tmp exit
"""
)


@dataclass(frozen=True)
class JobStatus:
    job_id: str
    state: str  # absent | running | succeeded | failed | died | cancelled
    exit_code: int | None = None
    pid: int | None = None
    log_size: int = 0
    detail: str = ""

    @property
    def terminal(self) -> bool:
        return self.state in TERMINAL

    def to_json(self) -> dict:
        return asdict(self)


def exit_detail(code: int) -> str:
    """How the job's command ended; a shell reports death by signal N as exit code 128 + N."""
    if 128 < code < 128 + 65:
        return exit_reason.describe(128 - code)
    return exit_reason.describe(code)


def jobs_root(target: Target) -> str:
    return f"{target.state_dir}/{JOBS_DIR}"


def job_dir(target: Target, job_id: str) -> str:
    return f"{jobs_root(target)}/{check_job_id(job_id)}"


def log_path(target: Target, job_id: str) -> str:
    """The job's output on the host: what `follow` reads."""
    return f"{job_dir(target, job_id)}/log"


def shown(path: str) -> str:
    """A host path as a user reads it: relative ones are under the login's home."""
    return path if path.startswith("/") else f"~/{path}"


def check_job_id(job_id: str) -> str:
    if not isinstance(job_id, str) or not JOB_ID.fullmatch(job_id):
        raise BadInput(f"job id {job_id!r} is not valid: use 1–128 letters, digits, '.', '_', '-' (not first)")
    return job_id


def status(conn: Connection, job_id: str) -> JobStatus:
    """The job's state in one round trip."""
    d = job_dir(conn.target, job_id)
    out = run(conn, f"{_STATUS_FN}\nst {shlex.quote(d)}").stdout
    return _parse_status(job_id, out)


def job_script(command: str, exports: str = "", *, sources_secrets: bool = False, cwd: str | None = None) -> str:
    """A job's job.sh: the secrets file sourced and deleted (where one is uploaded), `exports` (`env_prefix`'s), the
    working directory, then `command`."""
    job_sh = "# Written by remote.ssh.jobs.\n"
    if sources_secrets:
        job_sh += "if [ -f ./secret.env ]; then . ./secret.env; rm -f ./secret.env; fi\n"
    if exports:
        job_sh += exports + "\n"
    if cwd is not None:
        job_sh += f"cd -- {shlex.quote(cwd)} || exit 126\n"
    return job_sh + command + "\n"


def start(
    conn: Connection,
    job_id: str,
    command: str,
    *,
    env: Mapping[str, str] | None = None,
    secret_env: Mapping[str, str] | None = None,
    cwd: str | None = None,
) -> JobStatus:
    """Start `command` (a /bin/sh command line) detached, unless job `job_id` exists: then return its state.

    `env` values are exported shell-quoted; `secret_env` values travel only over SFTP into a 0600 file that
    the job sources and deletes. Returns the state right after launch (normally `running`).
    """
    if not isinstance(command, str) or not command.strip():
        raise BadInput("the job's command is empty")
    exports = env_prefix(env)
    secret_exports = env_prefix(secret_env)
    current = status(conn, job_id)
    if current.state != "absent":
        log.info("job %s already exists (%s): not starting it again", job_id, current.state)
        return current
    root = jobs_root(conn.target)
    staging = f"{root}/.staging-{job_id}-{_secrets.token_hex(4)}"
    run(conn, f"mkdir -p -- {shlex.quote(root)}")
    job_sh = job_script(command, exports, sources_secrets=bool(secret_exports), cwd=cwd)
    try:
        sftp = conn.sftp()
        sftp.mkdir(staging, 0o700)
        if secret_exports:
            with sftp.open(f"{staging}/secret.env", "w") as f:
                f.chmod(0o600)  # before any byte is written
                f.write(secret_exports.encode())
        for name, text in (("job.sh", job_sh), ("run.sh", _RUN_SH)):
            with sftp.open(f"{staging}/{name}", "w") as f:
                f.write(text.encode())
    except (OSError, EOFError) as e:
        conn.close()
        raise Unreachable(conn.host, f"upload of job {job_id} failed: {type(e).__name__}") from None
    q_root, q_id, q_stage = (shlex.quote(p) for p in (root, job_id, staging.rsplit("/", 1)[1]))
    # Claim and launch in one shell, so a dropped connection cannot leave a claimed but unlaunched job.
    launch = f"""{_STATUS_FN}
cd -- {q_root} || exit 1
if mv -T -- {q_stage} {q_id} 2>/dev/null; then
  (cd -- {q_id} && exec setsid nohup sh ./run.sh) </dev/null >{q_id}/log 2>&1 &
else
  rm -rf -- {q_stage}
fi
st {q_id}"""
    return _parse_status(job_id, run(conn, launch).stdout)


def cancel(conn: Connection, job_id: str, *, grace_s: float = 10.0) -> JobStatus:
    """Stop a running job's whole session: SIGTERM, then SIGKILL after `grace_s`.

    A finished job is left as it is; the returned state says what the job ended as.
    """
    d = shlex.quote(job_dir(conn.target, job_id))
    polls = max(1, int(grace_s / 0.1))
    script = f"""{_STATUS_FN}
d={d}
started "$d"
if [ -d "$d" ] && [ ! -e "$d/exit" ]; then
  : > "$d/cancelled"
  if same_boot "$d" && alive "$d"; then
    # The whole session: a child that made its own process group (MaxText's trainer) is in it too.
    signal_session TERM "$pid"
    i=0; while signal_session 0 "$pid" && [ $i -lt {polls} ]; do sleep 0.1; i=$((i+1)); done
    signal_session KILL "$pid"
    i=0; while alive "$d" && [ $i -lt 50 ]; do sleep 0.1; i=$((i+1)); done
  fi
fi
st "$d"
"""
    status_now = _parse_status(job_id, run(conn, script, timeout=grace_s + conn.target.command_timeout).stdout)
    if status_now.state == "absent":
        raise JobNotFound(f"no job {job_id} on {conn.host}")
    return status_now


def follow(
    target: Target,
    job_id: str,
    on_line: Callable[[str], None],
    offset: int = 0,
    *,
    wait_s: float = 2.0,
    reconnect_deadline_s: float = 600.0,
    max_backoff_s: float = 5.0,
    on_status: Callable[[JobStatus], None] | None = None,
    conn: Connection | None = None,
) -> int:
    """Stream the job's log from byte `offset` to `on_line` (one call per line) until it has an exit code.

    `on_status` sees the job's state after every poll (at most every `wait_s` while the log is silent).
    Returns the job's exit code. Connection failures are retried with exponential backoff for up to
    `reconnect_deadline_s` of continuous failure; the job itself is never touched. Raises `JobLost` if the
    job ended without an exit code, `JobNotFound` if there is no such job, `Unreachable` past the deadline.
    """
    check_job_id(job_id)
    pending = b""  # bytes of a line not yet complete
    pos = offset
    backoff, down_since = 0.2, None
    while True:
        try:
            if conn is None:
                conn = connect(target)
            state, chunk = _poll(conn, job_id, pos, wait_s)
        except Unreachable as e:
            if conn is not None:
                conn.close()
                conn = None
            now = time.monotonic()
            down_since = down_since or now
            if now - down_since + backoff > reconnect_deadline_s:
                raise Unreachable(
                    target.host,
                    f"{e.reason}; gave up after {now - down_since:.0f} s. The job keeps running: "
                    f"follow again from offset {pos - len(pending)}",
                ) from None
            log.warning("%s; reconnecting in %.1f s (log offset %d)", e, backoff, pos - len(pending))
            time.sleep(backoff)
            backoff = min(backoff * 2, max_backoff_s)
            continue
        backoff, down_since = 0.2, None
        if on_status is not None:
            on_status(state)
        if chunk:
            pos += len(chunk)
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                on_line(line.decode("utf-8", "replace"))
            continue
        if state.state == "absent":
            raise JobNotFound(f"no job {job_id} on {target.host}")
        if state.terminal:
            if pending:
                on_line(pending.decode("utf-8", "replace"))
            conn.close()
            if state.exit_code is None:
                raise JobLost(job_id, state.state, state.detail)
            return state.exit_code


def _poll(conn: Connection, job_id: str, offset: int, wait_s: float) -> tuple[JobStatus, bytes]:
    """Wait up to `wait_s` on the host for new log bytes or an exit; return the state and the new bytes."""
    d = shlex.quote(job_dir(conn.target, job_id))
    polls = max(1, int(wait_s / 0.1))
    script = f"""{_STATUS_FN}
d={d}; i=0
while [ ! -e "$d/exit" ] && alive "$d" && [ $i -lt {polls} ]; do
  [ "$(stat -c %s "$d/log" 2>/dev/null || echo 0)" -gt {offset} ] && break
  sleep 0.1; i=$((i+1))
done
st "$d"
echo log=$(tail -c +{offset + 1} "$d/log" 2>/dev/null | head -c {_CHUNK} | base64 -w0)"""
    out = run(conn, script, timeout=wait_s + conn.target.command_timeout).stdout
    encoded = next((line[4:] for line in out.splitlines() if line.startswith("log=")), "")
    return _parse_status(job_id, out), base64.b64decode(encoded)


def _parse_status(job_id: str, out: str) -> JobStatus:
    kv = dict(line.split("=", 1) for line in out.splitlines() if "=" in line)
    if kv.get("state") == "absent":
        return JobStatus(job_id, "absent")
    pid = int(kv["pid"]) if kv.get("pid") else None
    size = int(kv.get("size") or 0)
    code = int(kv["exit"]) if kv.get("exit") else None
    if code is not None:
        return JobStatus(job_id, "succeeded" if code == 0 else "failed", code, pid, size, exit_detail(code))
    if kv.get("alive") == "1":
        return JobStatus(job_id, "running", None, pid, size)
    if kv.get("cancelled") == "1":
        return JobStatus(job_id, "cancelled", None, pid, size, "cancelled on request")
    if kv.get("boot") == "changed":
        return JobStatus(job_id, "died", None, pid, size, "the host rebooted since the job started")
    detail = f"process {pid} is gone" if pid else "the job never recorded a pid"
    return JobStatus(job_id, "died", None, pid, size, detail)
