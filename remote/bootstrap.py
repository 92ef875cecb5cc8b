"""Idempotent host bootstrap: a small graph of install steps, skipped entirely when already done with the same inputs.

Each step names the steps it needs (`after`; by default the one listed before it). A step starts as soon as
everything it needs is done, so independent branches (apt beside uv → Python → venv → MaxText) run at once,
each over its own SSH connection. On the host, under `<state_dir>/bootstrap/`:
  fingerprint   sha256 of the whole spec, written (tmp + mv) only after every step succeeded
  done/<hash>   one marker per completed step; a step's hash covers it, the spec's environment and the hashes
                of the steps it needs, so a changed step re-runs itself and everything that depends on it,
                and nothing else
  locks/<name>  flock: a step holds its own exclusively and those of everything it depends on shared, so two
                bootstraps, or one and the remains of an interrupted one, never run the same step twice at once,
                nor a step beside one it depends on
  logs/<name>   the output of a detached step, which the bootstrap phase starts in its own session and does not
                wait for (`leave_running`): convert runs beside it, and train and export wait for it
                (`left_running`, `finish_detached`)
A re-run with an equal fingerprint costs one round trip per host and installs nothing. An interrupted run
leaves no fingerprint; the next run skips the steps whose markers exist and re-runs the rest. When a step
fails, no further step starts; those already running are let finish (killing apt or uv mid-install would break
the install) and keep their markers; then the first failure is raised, naming its step.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
import shlex
import threading
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor, wait
from dataclasses import dataclass, field
from typing import Any, TextIO, cast

from invoke.runners import Result

from remote.connection import Connection, connect, env_prefix, run
from remote.errors import BadInput, CommandFailed, RemoteError, describe
from remote.secrets import secret_file, write_secret
from remote.target import Target
from remote.wait import wait_for_ssh
from remote.workers import on_every_host
from workload.config import HUB_IDS, PipelineConfig
from workload.contract import HF_TOKEN_SECRET, SCRATCH_DIR, STATE_DIR
from workload.layout import hf_home

log = logging.getLogger("remote")

UV = "$HOME/.local/bin/uv"  # where astral's installer puts uv
UV_VERSION = "0.13.9"  # the uv this project's own venv pins (requirements.txt)
UV_INSTALLER = f"https://astral.sh/uv/{UV_VERSION}/install.sh"  # astral's installer for exactly that version
# A first boot's apt-daily / unattended-upgrades hold dpkg's lock for minutes: wait for it instead of failing,
# and never stop at a prompt (a changed config file keeps the local version, or the package default). LC_ALL=C:
# the lock message `apt_update` looks for is apt's English one.
APT_LOCK_WAIT_S = 900
APT_GET = ("sudo", "env", "LC_ALL=C", "DEBIAN_FRONTEND=noninteractive", "apt-get", "-q",
           "-o", f"DPkg::Lock::Timeout={APT_LOCK_WAIT_S}",
           "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold")
VENV = "maxtext_venv"  # relative to the home directory, as in the seed
# The Hub client that downloads the weights, hf-xet (the transfer the Gemma repositories are stored for) and typer
# (the newest no longer brings the click that `hf` imports): the versions pinned beside MaxText in
# workload/maxtext-requirements.txt.
HUB_CLIENT = ("huggingface_hub==1.14.0", "hf-xet==1.5.0", "typer==0.25.1")
_SKIPPED = "TPU_SFT_STEP_ALREADY_DONE"
_SPEC_SHAPE = ('{"steps": [{"name": …, "command": …, "timeout_s": …, "after": [names], "detached": false}], '
               '"env": {…}}')


@dataclass(frozen=True)
class Step:
    name: str
    command: str  # run by /bin/sh on the host, from the home directory; must be safe to run again
    timeout_s: float = 3600.0  # not part of the fingerprint: changing it changes nothing installed
    # The steps this one needs, all listed before it; None: the step listed just before it (the first: nothing).
    after: tuple[str, ...] | None = None
    # Left running on the host by the bootstrap phase, so that convert starts beside it; train and export wait
    # for it (remote/ship.py finish_install). Only a detached step may need a detached step. Not part of the
    # fingerprint: where it runs changes nothing installed.
    detached: bool = False


@dataclass(frozen=True)
class BootstrapSpec:
    steps: tuple[Step, ...]  # every step's `after` resolved (never None) once built
    env: dict[str, str] = field(default_factory=dict)  # exported (quoted) for every step; part of the fingerprint

    def __post_init__(self) -> None:
        if not self.steps:
            raise BadInput("a bootstrap spec needs at least one step")
        names = [s.name for s in self.steps]
        if len(set(names)) != len(names):
            raise BadInput(f"bootstrap step names must be distinct, got {names}")
        resolved = []
        for number, step in enumerate(self.steps):
            after = tuple(step.after) if step.after is not None else tuple(names[number - 1:number])
            unknown = [name for name in after if name not in names[:number]]
            if unknown:
                raise BadInput(f"bootstrap spec: step {step.name!r} needs {unknown[0]!r}, which is not a step "
                               "listed before it")
            detached = [name for name in after if self.steps[names.index(name)].detached]
            if detached and not step.detached:
                raise BadInput(f"bootstrap spec: step {step.name!r} needs {detached[0]!r}, which is detached: "
                               f"make {step.name!r} detached too, or {detached[0]!r} not")
            resolved.append(dataclasses.replace(step, after=after))
        object.__setattr__(self, "steps", tuple(resolved))

    def needs(self, step: Step) -> tuple[str, ...]:
        """`step.after`, resolved."""
        return step.after or ()

    def ancestors(self, name: str) -> set[str]:
        """Every step that `name` depends on, directly or through others."""
        by_name = {s.name: s for s in self.steps}
        found: set[str] = set()
        pending = list(self.needs(by_name[name]))
        while pending:
            current = pending.pop()
            if current not in found:
                found.add(current)
                pending.extend(self.needs(by_name[current]))
        return found

    def step_hashes(self) -> list[str]:
        """Chained through the graph: each covers its step and the hashes of the steps it needs; a step that needs
        nothing covers the spec's environment instead (so every hash covers it)."""
        by_name: dict[str, str] = {}
        root = json.dumps(sorted(self.env.items()))
        for step in self.steps:
            previous = "\0".join(sorted(by_name[n] for n in self.needs(step))) or root
            by_name[step.name] = hashlib.sha256(f"{previous}\0{step.name}\0{step.command}".encode()).hexdigest()
        return [by_name[s.name] for s in self.steps]

    @property
    def fingerprint(self) -> str:
        return hashlib.sha256("\0".join(sorted(self.step_hashes())).encode()).hexdigest()

    @classmethod
    def from_json(cls, text: str) -> "BootstrapSpec":
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as e:
            raise BadInput(f"bootstrap spec is not valid JSON ({e.msg}); expected {_SPEC_SHAPE}") from None
        return cls.from_mapping(raw)

    @classmethod
    def from_mapping(cls, raw: Any) -> "BootstrapSpec":
        if not isinstance(raw, dict) or set(raw) - {"steps", "env"}:
            raise BadInput(f"bootstrap spec must be a JSON object with only steps and env; expected {_SPEC_SHAPE}")
        steps = raw.get("steps")
        if not isinstance(steps, list) or not steps:
            raise BadInput(f"bootstrap spec: steps must be a non-empty list; expected {_SPEC_SHAPE}")
        env = raw.get("env", {})
        if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
            raise BadInput(f"bootstrap spec: env must be an object of names to string values; expected {_SPEC_SHAPE}")
        env_prefix(env)  # names a shell accepts
        return cls(tuple(_step(number, step) for number, step in enumerate(steps, 1)), env)

    def to_mapping(self) -> dict[str, Any]:
        return {"steps": [{**vars(s), "after": list(self.needs(s))} for s in self.steps], "env": self.env}

    def to_json(self) -> str:
        return json.dumps(self.to_mapping(), indent=2)


_STEP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def _step(number: int, raw: object) -> Step:
    if not isinstance(raw, dict) or set(raw) - {"name", "command", "timeout_s", "after", "detached"}:
        raise BadInput(f"bootstrap spec: step {number} must be an object with name, command, timeout_s, after "
                       "and detached")
    name, command, timeout = raw.get("name"), raw.get("command"), raw.get("timeout_s", 3600.0)
    after, detached = raw.get("after"), raw.get("detached", False)
    if not isinstance(name, str) or not _STEP_NAME.fullmatch(name):
        raise BadInput(f"bootstrap spec: step {number}'s name {name!r} is not 1–64 letters, digits, '.', '_', '-'")
    if not isinstance(command, str) or not command.strip():
        raise BadInput(f"bootstrap spec: step {name}'s command must be a non-empty string")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 86400:
        raise BadInput(f"bootstrap spec: step {name}'s timeout_s {timeout!r} is not a number of seconds in (0, 86400]")
    if after is not None and (not isinstance(after, list) or not all(isinstance(a, str) for a in after)):
        raise BadInput(f"bootstrap spec: step {name}'s after must be a list of step names")
    if not isinstance(detached, bool):
        raise BadInput(f"bootstrap spec: step {name}'s detached must be true or false")
    return Step(name, command, float(timeout), None if after is None else tuple(after), detached)


@dataclass(frozen=True)
class BootstrapResult:
    host: str
    installed: bool  # False: the fingerprint matched and nothing ran
    steps_run: tuple[str, ...]
    fingerprint: str
    left_running: tuple[str, ...] = ()  # detached steps started and not waited for: no fingerprint yet


def spec_for(config: PipelineConfig, *, venv: str = VENV, work_dir: str = SCRATCH_DIR,
             state_dir: str = STATE_DIR) -> BootstrapSpec:
    """Seed step 3 (shared/seed/README.md) as a spec: apt packages, uv, Python 3.12, the venv, pinned MaxText,
    and `install_tpu_post_train_extra_deps` when `install_post_train_extras` (slow: tunix, tpu-inference and
    vLLM from GitHub). `torch_backend` becomes UV_TORCH_BACKEND. On the full profile, also the model's weights
    into the HF cache under `work_dir`, which to_maxtext (seed step 4) then reads instead of downloading them.

    Independent work runs at once: apt; uv → Python → venv → MaxText (uv brings its own Python and MaxText's
    wheels need no compiler); and, once Python is there, the weights (network-bound: gigabytes). The post-train
    extras build from source with apt's compilers, so they need both apt and MaxText; bootstrap leaves them
    running (detached), and convert, which does not need them, runs beside them."""
    apt = shlex.join(APT_GET)
    q_venv = shlex.quote(venv)
    steps = [
        Step("apt", f"{apt_update(apt)} && {apt} upgrade -y --fix-missing && "
                    f"{apt} install -y build-essential cmake ninja-build", 1800 + APT_LOCK_WAIT_S, after=()),
        Step("uv", download_and_run(UV_INSTALLER), 600, after=()),
        Step("python", f"{UV} python install 3.12", 600, after=("uv",)),
        Step("venv", f"{UV} venv --python 3.12 --seed --allow-existing {q_venv}", 600, after=("python",)),
        Step("maxtext", f"UV_TORCH_BACKEND={shlex.quote(config.torch_backend)} {UV} pip install "
                        f"--python {q_venv}/bin/python "
                        f"{shlex.quote(f'maxtext[tpu-post-train]=={config.maxtext_version}')} --resolution=lowest",
             3600, after=("venv",)),
    ]
    if config.install_post_train_extras:
        # Detached: convert does not need them, so it runs beside their build; train waits for them.
        steps.append(Step("post-train-extras", f". {q_venv}/bin/activate && install_tpu_post_train_extra_deps", 3600,
                          after=("apt", "maxtext"), detached=True))
    if config.profile == "full":
        steps.append(Step("weights", weights_download(HUB_IDS[config.model], hf_home(work_dir),
                                                      secret_file(state_dir, HF_TOKEN_SECRET)), 3600,
                          after=("python",)))
    return BootstrapSpec(tuple(steps))


def weights_download(repo: str, home: str, token_path: str) -> str:
    """`hf download` of a whole model repository into the HF cache at `home`, the token read from the file
    `put-secret` wrote (never on a command line). Only a head start: /dev/shm is empty again after a reboot, and
    to_maxtext then downloads what is missing itself. `hf download` fails (non-zero, the Hub's reason) on a
    refused token, a gated repository not accepted yet, or a network error."""
    q_token = shlex.quote(token_path)
    missing = (f"no HF token at {token_path} on this host, but {repo} is gated: export HF_TOKEN before "
               f"`pulumi up`, or pipe it into `python -m remote put-secret {HF_TOKEN_SECRET}`")
    return (f"{{ [ -s {q_token} ] || {{ echo {shlex.quote(missing)} >&2; exit 1; }}; }} && "
            f"HF_HOME={shlex.quote(home)} HF_TOKEN_PATH={q_token} HF_HUB_DISABLE_PROGRESS_BARS=1 "
            f"HF_HUB_DISABLE_TELEMETRY=1 HF_HUB_DISABLE_UPDATE_CHECK=1 {UV} tool run --python 3.12 "
            f"--from {HUB_CLIENT[0]} {' '.join(f'--with {pin}' for pin in HUB_CLIENT[1:])} "
            f"hf download {shlex.quote(repo)}")


def apt_update(apt: str) -> str:
    """`apt update`, retried every 5 s while another apt holds the package lists' lock (apt-daily on a first
    boot): DPkg::Lock::Timeout covers dpkg's own lock only, and `update` fails at once on the lists' lock."""
    return (
        f'tries=0; until out=$({apt} update 2>&1); do '
        f'echo "$out" | grep -q "Could not get lock" && [ $tries -lt {APT_LOCK_WAIT_S // 5} ] '
        '|| { echo "$out" >&2; exit 1; }; tries=$((tries+1)); sleep 5; done; echo "$out"'
    )


def download_and_run(url: str) -> str:
    """A shell command that downloads an installer script into a file and runs it only if the download
    succeeded and is not empty: `curl … | sh` runs an empty script, succeeds, and marks the step done."""
    q_url = shlex.quote(url)
    return (
        f'script=$(mktemp) && trap \'rm -f "$script"\' EXIT && '
        f'curl --fail --silent --show-error --location --retry 3 --output "$script" {q_url} && '
        f'{{ [ -s "$script" ] || {{ echo "downloaded an empty file from "{q_url} >&2; exit 1; }}; }} && '
        'sh "$script"'
    )


class BootstrapStepFailed(CommandFailed):
    """A bootstrap step exited non-zero: which step on which host, its exit code and its last line of output
    (what apt, curl or uv said; unlike an arbitrary command line, install output holds nothing secret)."""

    def __init__(self, host: str, step: str, exited: int, tail: tuple[str, ...]):
        super().__init__(host, exited, tail, what=f"bootstrap step {step!r}")
        self.step = step
        said = [line.strip() for line in tail if line.strip()]
        why = f": {said[-1][:300]}" if said else ""
        self.args = (f"{host}: bootstrap step {step!r} failed (exit {exited}){why}. "
                     "Fix that and run bootstrap again: completed steps are not redone",)


def is_current(conn: Connection, spec: BootstrapSpec) -> bool:
    """One round trip: does the host already hold exactly this spec's installation?"""
    path = shlex.quote(f"{_host_dir(conn.target)}/fingerprint")
    return run(conn, f"cat -- {path} 2>/dev/null; true").stdout.strip() == spec.fingerprint


def bootstrap(conn: Connection, spec: BootstrapSpec, *, stream: TextIO | None = None,
              leave_running: bool = False) -> BootstrapResult:
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
    locks = " ".join(f"flock {'' if name == step.name else '-s '}{shlex.quote(f'{base}/locks/{name}')}"
                     for name in sorted({step.name, *spec.ancestors(step.name)}))
    body = (f"if [ -e {marker} ]; then echo {_SKIPPED}; "
            f"else ( {step.command} ) && : > {marker}.tmp && mv -- {marker}.tmp {marker}; fi")
    return f"{locks} sh -c {shlex.quote(body)}"


def _marker(spec: BootstrapSpec, step: Step, base: str) -> str:
    digest = dict(zip((s.name for s in spec.steps), spec.step_hashes(), strict=True))[step.name]
    return f"{base}/done/{digest}"


def detached_script(spec: BootstrapSpec, step: Step, base: str, log_path: str) -> str:
    """The host command that starts `step_script` in its own session, outliving this SSH session, unless the
    step is done already. The step itself checks its marker again, inside its locks."""
    return (f"if [ -e {shlex.quote(_marker(spec, step, base))} ]; then echo {_SKIPPED}; "
            f"else setsid -f sh -c {shlex.quote(step_script(spec, step, base))} "
            f"> {shlex.quote(log_path)} 2>&1 < /dev/null; fi")


def left_running(conn: Connection, spec: BootstrapSpec) -> tuple[Step, ...]:
    """The detached steps a bootstrap started on this host that have not succeeded (their log is there, their
    marker is not): still running, or ended in failure or by a reboot. One round trip; none for a spec without
    detached steps. A host installed without leaving anything running has no such log."""
    detached = [s for s in spec.steps if s.detached]
    if not detached:
        return ()
    base = _host_dir(conn.target)
    checks = "".join(f"[ -e {shlex.quote(detached_log(conn.target, s.name))} ] && "
                     f"[ ! -e {shlex.quote(_marker(spec, s, base))} ] && echo {s.name}; " for s in detached)
    unfinished = run(conn, f"{checks}true").stdout.split()
    return tuple(s for s in detached if s.name in unfinished)


def finish_detached(conn: Connection, spec: BootstrapSpec, steps: tuple[Step, ...], *,
                    stream: TextIO | None = None) -> None:
    """Run `steps` (from `left_running`) in the foreground, one after another: each waits for its detached run
    (its lock) and is then skipped, or runs again if that run failed, raising `BootstrapStepFailed` if it fails
    again. Output goes to `stream` as in `bootstrap`."""
    base, output = _host_dir(conn.target), threading.Lock()
    for step in steps:
        _run_step(conn, spec, step, step_script(spec, step, base), stream, output)


def _run_step(conn: Connection, spec: BootstrapSpec, step: Step, script: str, stream: TextIO | None,
              output: threading.Lock) -> Result:
    """`script` (one of `step`'s) on the host; its lines to `stream`, led by the step's name (`output` keeps
    steps that run at once from interleaving); a non-zero exit raised as `BootstrapStepFailed`."""
    out, err = (_StepLines(stream, step.name, output), _StepLines(stream, step.name, output)) if stream else (
        None, None)
    try:
        return run(conn, script, env=spec.env, timeout=step.timeout_s,
                   stream=cast(TextIO, out), err_stream=cast(TextIO, err))
    except CommandFailed as failed:
        raise BootstrapStepFailed(failed.host, step.name, failed.exited, failed.tail) from None
    finally:
        for lines in (out, err):
            if lines:
                lines.end()


def _run_steps(conn: Connection, spec: BootstrapSpec, base: str, stream: TextIO | None,
               leave_running: bool) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Every step, each started once the steps it needs are done; independent ones at once, each over its own
    connection (`conn` is the first). Returns the steps that ran (the others were already done) and, with
    `leave_running`, the detached ones started in the background, each in spec order."""
    # By identity: Fabric's connections to one host and user compare equal.
    spare, opened, busy = [conn], [], dict[int, Connection]()
    guard, output = threading.Lock(), threading.Lock()

    def one(step: Step) -> str:
        with guard:
            own = spare.pop() if spare else None
        if own is None:
            own = connect(conn.target, conn.host)
            with guard:
                opened.append(own)
        with guard:
            busy[id(own)] = own
        log.info("%s: bootstrap step %s", conn.host, step.name)
        background = leave_running and step.detached
        script = (detached_script(spec, step, base, detached_log(conn.target, step.name)) if background
                  else step_script(spec, step, base))
        try:
            result = _run_step(own, spec, step, script, stream, output)
        finally:
            with guard:
                busy.pop(id(own), None)
                spare.append(own)
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
        with guard:
            for own in busy.values():
                own.close()
        raise
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
        for own in opened:
            own.close()
    if failures:
        for later in failures[1:]:
            log.error("%s: also failed: %s", conn.host, describe(later, conn.host))
        raise failures[0]
    return tuple(s.name for s in spec.steps if s.name in ran), tuple(s.name for s in spec.steps if s.name in left)


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


def bootstrap_all(target: Target, spec: BootstrapSpec, *, stream: TextIO | None = None, deadline_s: float = 0.0,
                  hf_token: str | None = None, leave_running: bool = False) -> dict[str, BootstrapResult | RemoteError]:
    """`bootstrap` on every host of the target in parallel; each host's result, or the error that stopped it.
    With `deadline_s`, each host is waited for that long (a new VM's workers answer SSH late too). `hf_token`,
    when given, is placed on each host first: the weights step reads it."""

    def one(host: str) -> BootstrapResult:
        with (wait_for_ssh(target, deadline_s, host) if deadline_s > 0 else connect(target, host)) as conn:
            if hf_token:
                write_secret(conn, HF_TOKEN_SECRET, hf_token)
            return bootstrap(conn, spec, stream=stream, leave_running=leave_running)

    return on_every_host(target, one)
