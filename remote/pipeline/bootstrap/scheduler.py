"""Bootstrap on the host: the shell script of each step, and the scheduler that runs a spec's steps there, each
as soon as the steps it needs are done, independent ones at once over their own connections. How and why:
ARCHITECTURE.md, "Reaching a new VM".

On the host, under `<state_dir>/bootstrap/`:
  fingerprint   the spec's fingerprint, written (tmp + mv) only after every step succeeded
  done/<hash>   one marker per completed step, named by its hash (spec.py `step_hashes`)
  locks/<name>  flock: a step holds its own exclusively and those of everything it depends on shared
  logs/<name>   the output of a detached step started with `leave_running`
A re-run with an equal fingerprint costs one round trip per host and installs nothing. When a step fails, no
further step starts, those already running finish and keep their markers, and the first failure is raised.
"""

from __future__ import annotations

import logging
import shlex
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import TextIO, cast

from invoke.runners import Result

from remote.pipeline.bootstrap.spec import BootstrapSpec, Step
from remote.ssh.connection import Connection, connect, env_prefix, run
from remote.ssh.errors import CommandFailed, RemoteError, describe
from remote.ssh.hosts import on_every_host
from remote.ssh.secrets import write_secret
from remote.ssh.target import Target
from remote.ssh.wait import wait_for_ssh
from workload.core.contract import HF_TOKEN_SECRET

log = logging.getLogger("remote")

_SKIPPED = "TPU_SFT_STEP_ALREADY_DONE"


@dataclass(frozen=True)
class BootstrapResult:
    host: str
    installed: bool  # False: the fingerprint matched and nothing ran
    steps_run: tuple[str, ...]
    fingerprint: str
    left_running: tuple[str, ...] = ()  # detached steps started and not waited for: no fingerprint yet


class BootstrapStepFailed(CommandFailed):
    """A bootstrap step exited non-zero: which step on which host, its exit code and its last line of output
    (what apt, curl or uv said; unlike an arbitrary command line, install output holds nothing secret)."""

    def __init__(self, host: str, step: str, exited: int, tail: tuple[str, ...]):
        super().__init__(host, exited, tail, what=f"bootstrap step {step!r}")
        self.step = step
        said = [line.strip() for line in tail if line.strip()]
        why = f": {said[-1][:300]}" if said else ""
        self.args = (
            f"{host}: bootstrap step {step!r} failed (exit {exited}){why}. "
            "Fix that and run bootstrap again: completed steps are not redone",
        )


def is_current(conn: Connection, spec: BootstrapSpec) -> bool:
    """One round trip: does the host already hold exactly this spec's installation?"""
    path = shlex.quote(f"{_host_dir(conn.target)}/fingerprint")
    return run(conn, f"cat -- {path} 2>/dev/null; true").stdout.strip() == spec.fingerprint


def bootstrap(
    conn: Connection, spec: BootstrapSpec, *, stream: TextIO | None = None, leave_running: bool = False
) -> BootstrapResult:
    """Bring the host to `spec`: nothing at all if its fingerprint is already there, else each step not yet
    done, each as soon as the steps it needs are, then the fingerprint. Step output goes to `stream` as it
    arrives, if given, each line led by its step's name. A failing step raises `BootstrapStepFailed`, a
    `CommandFailed` naming the step (a timeout `Unreachable`), is not marked done and leaves no fingerprint.

    `leave_running`: detached steps not done yet are started in the background (their output in
    `<state_dir>/bootstrap/logs/<step>.log`) and not waited for; then no fingerprint is written, and a later
    bootstrap without it waits for them (their locks) and finishes the install, re-running one that failed."""
    if is_current(conn, spec):
        log.info("%s: bootstrap %s… already done", conn.host, spec.fingerprint[:12])
        return BootstrapResult(conn.host, False, (), spec.fingerprint)
    base = _host_dir(conn.target)
    q_base = shlex.quote(base)
    run(conn, f"mkdir -p -- {q_base}/done {q_base}/locks {q_base}/logs")
    ran, left = _run_steps(conn, spec, base, stream, leave_running)
    if left:
        log.info("%s: bootstrap %s… left running: %s", conn.host, spec.fingerprint[:12], ", ".join(left))
        return BootstrapResult(conn.host, True, ran, spec.fingerprint, left)
    fp = shlex.quote(f"{base}/fingerprint")
    run(conn, f"printf %s {spec.fingerprint} > {fp}.$$ && mv -- {fp}.$$ {fp}")
    log.info("%s: bootstrap %s… complete (ran: %s)", conn.host, spec.fingerprint[:12], ", ".join(ran) or "nothing")
    return BootstrapResult(conn.host, True, ran, spec.fingerprint)


def _host_dir(target: Target) -> str:
    """`<state_dir>/bootstrap`: the fingerprint, markers, locks and logs on the host."""
    return f"{target.state_dir}/bootstrap"


def detached_log(target: Target, step: str) -> str:
    return f"{_host_dir(target)}/logs/{step}.log"


def step_script(spec: BootstrapSpec, step: Step, base: str) -> str:
    """The host command of one step: its locks (what it needs shared, its own exclusive, taken in name order so
    two runs never wait on each other in a circle), then, unless its marker exists, the step and its marker.
    The check is inside the locks: the leftovers of an interrupted run may still be finishing this step."""
    marker = shlex.quote(_marker(spec, step, base))
    locks = " ".join(
        f"flock {'' if name == step.name else '-s '}{shlex.quote(f'{base}/locks/{name}')}"
        for name in sorted({step.name, *spec.ancestors(step.name)})
    )
    body = (
        f"if [ -e {marker} ]; then echo {_SKIPPED}; "
        f"else ( {step.command} ) && : > {marker}.tmp && mv -- {marker}.tmp {marker}; fi"
    )
    return f"{locks} sh -c {shlex.quote(body)}"


def finish_script(target: Target, spec: BootstrapSpec, steps: tuple[Step, ...]) -> str:
    """A host script that does what `finish_detached` does, for a job to run later on the host itself: each of
    `steps` waits for its detached run and is skipped, or runs again if that run failed (the script then fails)."""
    base = _host_dir(target)
    exports = env_prefix(spec.env)
    lines = ['cd "$HOME" || exit 1', *([exports] if exports else []), "set -e"]
    return "\n".join([*lines, *(step_script(spec, step, base) for step in steps)]) + "\n"


def install_script(target: Target, spec: BootstrapSpec) -> str:
    """A host script that does what `bootstrap` does, for the host to run alone (a VM its group recreated on a new
    boot disk: remote/pipeline/resume_kit.py): every step in spec order (which puts each after those it needs), in
    the foreground, a detached one too, each with its locks and skipped where its marker is, then the fingerprint.
    A `pulumi up` that reaches the host meanwhile waits on the same locks and finds the steps done."""
    base = _host_dir(target)
    q_base, fp = shlex.quote(base), shlex.quote(f"{base}/fingerprint")
    prepare = f"mkdir -p -- {q_base}/done {q_base}/locks {q_base}/logs"
    steps = finish_script(target, spec, spec.steps).replace("set -e\n", f"set -e\n{prepare}\n", 1)
    return f"{steps}printf %s {spec.fingerprint} > {fp}.$$ && mv -- {fp}.$$ {fp}\n"


def _marker(spec: BootstrapSpec, step: Step, base: str) -> str:
    digest = dict(zip((s.name for s in spec.steps), spec.step_hashes(), strict=True))[step.name]
    return f"{base}/done/{digest}"


def detached_script(spec: BootstrapSpec, step: Step, base: str, log_path: str) -> str:
    """The host command that starts `step_script` in its own session, outliving this SSH session, unless the
    step is done already. The step itself checks its marker again, inside its locks."""
    return (
        f"if [ -e {shlex.quote(_marker(spec, step, base))} ]; then echo {_SKIPPED}; "
        f"else setsid -f sh -c {shlex.quote(step_script(spec, step, base))} "
        f"> {shlex.quote(log_path)} 2>&1 < /dev/null; fi"
    )


def left_running(conn: Connection, spec: BootstrapSpec) -> tuple[Step, ...]:
    """The detached steps a bootstrap started on this host that have not succeeded (their log is there, their
    marker is not): still running, or ended in failure or by a reboot. One round trip; none for a spec without
    detached steps. A host installed without leaving anything running has no such log."""
    detached = [s for s in spec.steps if s.detached]
    if not detached:
        return ()
    base = _host_dir(conn.target)
    checks = "".join(
        f"[ -e {shlex.quote(detached_log(conn.target, s.name))} ] && "
        f"[ ! -e {shlex.quote(_marker(spec, s, base))} ] && echo {s.name}; "
        for s in detached
    )
    unfinished = run(conn, f"{checks}true").stdout.split()
    return tuple(s for s in detached if s.name in unfinished)


def finish_detached(
    conn: Connection, spec: BootstrapSpec, steps: tuple[Step, ...], *, stream: TextIO | None = None
) -> None:
    """Run `steps` (from `left_running`) in the foreground, one after another: each waits for its detached run
    (its lock) and is then skipped, or runs again if that run failed, raising `BootstrapStepFailed` if it fails
    again. Output goes to `stream` as in `bootstrap`."""
    base, output = _host_dir(conn.target), threading.Lock()
    for step in steps:
        _run_step(conn, spec, step, step_script(spec, step, base), stream, output)


def _run_step(
    conn: Connection, spec: BootstrapSpec, step: Step, script: str, stream: TextIO | None, output: threading.Lock
) -> Result:
    """`script` (one of `step`'s) on the host; its lines to `stream`, led by the step's name (`output` keeps
    steps that run at once from interleaving); a non-zero exit raised as `BootstrapStepFailed`."""
    out, err = (
        (_StepLines(stream, step.name, output), _StepLines(stream, step.name, output)) if stream else (None, None)
    )
    try:
        return run(
            conn, script, env=spec.env, timeout=step.timeout_s, stream=cast(TextIO, out), err_stream=cast(TextIO, err)
        )
    except CommandFailed as failed:
        raise BootstrapStepFailed(failed.host, step.name, failed.exited, failed.tail) from None
    finally:
        for lines in (out, err):
            if lines:
                lines.end()


def _run_steps(
    conn: Connection, spec: BootstrapSpec, base: str, stream: TextIO | None, leave_running: bool
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Every step, each started once the steps it needs are done; independent ones at once, each over its own
    connection (`conn` is the first). Returns the steps that ran (the others were already done) and, with
    `leave_running`, the detached ones started in the background, each in spec order."""
    connections, output = _ConnectionPool(conn), threading.Lock()

    def one(step: Step) -> str:
        own = connections.take()
        log.info("%s: bootstrap step %s", conn.host, step.name)
        background = leave_running and step.detached
        script = (
            detached_script(spec, step, base, detached_log(conn.target, step.name))
            if background
            else step_script(spec, step, base)
        )
        try:
            result = _run_step(own, spec, step, script, stream, output)
        finally:
            connections.give_back(own)
        if _SKIPPED in result.stdout:
            return "skipped"
        return "left running" if background else "ran"

    waiting, done, ran, left = list(spec.steps), set[str](), set[str](), set[str]()
    running: dict[Future, Step] = {}
    failures: list[RemoteError] = []
    pool = ThreadPoolExecutor(max_workers=len(spec.steps))
    try:
        while waiting or running:
            ready = [] if failures else [s for s in waiting if set(spec.needs(s)) <= done]
            for step in ready:
                waiting.remove(step)
                running[pool.submit(one, step)] = step
            if not running:
                break
            finished, _ = wait(running, return_when=FIRST_COMPLETED)
            for future in finished:
                step = running.pop(future)
                try:
                    outcome = future.result()
                    if outcome == "ran":
                        ran.add(step.name)
                    elif outcome == "left running":
                        left.add(step.name)
                    done.add(step.name)
                except RemoteError as failure:
                    failures.append(failure)
    except BaseException:
        # Interrupted (Ctrl-C): cut the running steps' connections so their threads end now. On the host the
        # steps go on as leftovers, which the next run waits for (their locks).
        connections.cut_busy()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        connections.close_opened()
    if failures:
        for later in failures[1:]:
            log.error("%s: also failed: %s", conn.host, describe(later, conn.host))
        raise failures[0]
    return tuple(s.name for s in spec.steps if s.name in ran), tuple(s.name for s in spec.steps if s.name in left)


class _ConnectionPool:
    """The connections one host's steps run over: `first` (the caller's, which it closes) and a new one whenever
    a step starts while all the others are busy. Any thread may take and give back."""

    def __init__(self, first: Connection):
        self.first = first
        # By object id: Fabric's connections to one host and user compare equal.
        self.spare, self.opened, self.busy = [first], list[Connection](), dict[int, Connection]()
        self.guard = threading.Lock()

    def take(self) -> Connection:
        """A spare connection, or a new one to the same host; busy until given back."""
        with self.guard:
            own = self.spare.pop() if self.spare else None
        if own is None:
            own = connect(self.first.target, self.first.host)
            with self.guard:
                self.opened.append(own)
        with self.guard:
            self.busy[id(own)] = own
        return own

    def give_back(self, own: Connection) -> None:
        with self.guard:
            self.busy.pop(id(own), None)
            self.spare.append(own)

    def cut_busy(self) -> None:
        """Close the connections steps are running over, so that their threads end now."""
        with self.guard:
            for own in self.busy.values():
                own.close()

    def close_opened(self) -> None:
        """Close every connection opened here (not `first`)."""
        for own in self.opened:
            own.close()


class _StepLines:
    """One step's output stream: whole lines only, each led by the step's name, so that steps running at once
    never interleave in the middle of a line."""

    def __init__(self, stream: TextIO, name: str, lock: threading.Lock):
        self.stream, self.prefix, self.lock, self.pending = stream, f"{name} | ", lock, ""

    def write(self, text: str) -> int:
        *lines, self.pending = (self.pending + text).split("\n")
        if lines:
            self._put(lines)
        return len(text)

    def flush(self) -> None:
        pass

    def end(self) -> None:
        if self.pending:
            self._put([self.pending])
            self.pending = ""

    def _put(self, lines: list[str]) -> None:
        with self.lock:
            self.stream.write("".join(f"{self.prefix}{line}\n" for line in lines))
            self.stream.flush()


def bootstrap_all(
    target: Target,
    spec: BootstrapSpec,
    *,
    stream: TextIO | None = None,
    deadline_s: float = 0.0,
    hf_token: str | None = None,
    leave_running: bool = False,
) -> dict[str, BootstrapResult | RemoteError]:
    """`bootstrap` on every host of the target in parallel; each host's result, or the error that stopped it.
    With `deadline_s`, each host is waited for that long (a new VM's workers answer SSH late too). `hf_token`,
    when given, is placed on each host first: the weights step reads it."""

    def one(host: str) -> BootstrapResult:
        with wait_for_ssh(target, deadline_s, host) if deadline_s > 0 else connect(target, host) as conn:
            if hf_token:
                write_secret(conn, HF_TOKEN_SECRET, hf_token)
            return bootstrap(conn, spec, stream=stream, leave_running=leave_running)

    return on_every_host(target, one)
