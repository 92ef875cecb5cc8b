"""Idempotent host bootstrap: a list of install steps, skipped entirely when already done with the same inputs.

On the host, under `<state_dir>/bootstrap/`:
  fingerprint   sha256 of the whole spec, written (tmp + mv) only after every step succeeded
  done/<hash>   one marker per completed step; a step's hash covers it and every step before it, so a
                changed step re-runs itself and everything after it, and nothing before it
  lock          held (flock) while a step runs, so two bootstraps, or one and the remains of an
                interrupted one, never install at the same time
A re-run with an equal fingerprint costs one round trip per host and installs nothing. An interrupted run
leaves no fingerprint; the next run skips the steps whose markers exist and re-runs the rest.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shlex
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, TextIO

from remote.connection import Connection, connect, env_prefix, run
from remote.errors import BadInput, CommandFailed, RemoteError
from remote.target import Target
from workload.config import PipelineConfig

log = logging.getLogger("remote")

UV = "$HOME/.local/bin/uv"  # where astral's installer puts uv
VENV = "maxtext_venv"  # relative to the home directory, as in the seed
_SKIPPED = "TPU_SFT_STEP_ALREADY_DONE"
_SPEC_SHAPE = '{"steps": [{"name": …, "command": …, "timeout_s": …}], "env": {…}}'


@dataclass(frozen=True)
class Step:
    name: str
    command: str  # run by /bin/sh on the host, from the home directory; must be safe to run again
    timeout_s: float = 3600.0  # not part of the fingerprint: changing it changes nothing installed


@dataclass(frozen=True)
class BootstrapSpec:
    steps: tuple[Step, ...]
    env: dict[str, str] = field(default_factory=dict)  # exported (quoted) for every step; part of the fingerprint

    def __post_init__(self) -> None:
        if not self.steps:
            raise BadInput("a bootstrap spec needs at least one step")
        names = [s.name for s in self.steps]
        if len(set(names)) != len(names):
            raise BadInput(f"bootstrap step names must be distinct, got {names}")

    def step_hashes(self) -> list[str]:
        """Chained: each covers its step, the spec's environment and every earlier step."""
        hashes, previous = [], json.dumps(sorted(self.env.items()))
        for step in self.steps:
            previous = hashlib.sha256(f"{previous}\0{step.name}\0{step.command}".encode()).hexdigest()
            hashes.append(previous)
        return hashes

    @property
    def fingerprint(self) -> str:
        return self.step_hashes()[-1]

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
        return {"steps": [vars(s) for s in self.steps], "env": self.env}

    def to_json(self) -> str:
        return json.dumps(self.to_mapping(), indent=2)


_STEP_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def _step(number: int, raw: object) -> Step:
    if not isinstance(raw, dict) or set(raw) - {"name", "command", "timeout_s"}:
        raise BadInput(f"bootstrap spec: step {number} must be an object with name, command and timeout_s")
    name, command, timeout = raw.get("name"), raw.get("command"), raw.get("timeout_s", 3600.0)
    if not isinstance(name, str) or not _STEP_NAME.fullmatch(name):
        raise BadInput(f"bootstrap spec: step {number}'s name {name!r} is not 1–64 letters, digits, '.', '_', '-'")
    if not isinstance(command, str) or not command.strip():
        raise BadInput(f"bootstrap spec: step {name}'s command must be a non-empty string")
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) or not 0 < timeout <= 86400:
        raise BadInput(f"bootstrap spec: step {name}'s timeout_s {timeout!r} is not a number of seconds in (0, 86400]")
    return Step(name, command, float(timeout))


@dataclass(frozen=True)
class BootstrapResult:
    host: str
    installed: bool  # False: the fingerprint matched and nothing ran
    steps_run: tuple[str, ...]
    fingerprint: str


def spec_for(config: PipelineConfig, *, venv: str = VENV) -> BootstrapSpec:
    """Seed step 3 (shared/seed/README.md) as a spec: apt packages, uv, Python 3.12, the venv, pinned MaxText,
    and `install_tpu_post_train_extra_deps` when `install_post_train_extras` (slow: tunix, tpu-inference and
    vLLM from GitHub). `torch_backend` becomes UV_TORCH_BACKEND."""
    apt = "sudo DEBIAN_FRONTEND=noninteractive apt-get"
    q_venv = shlex.quote(venv)
    steps = [
        Step("apt", f"{apt} update -q && {apt} upgrade -y -q --fix-missing && "
                    f"{apt} install -y -q build-essential cmake ninja-build", 1800),
        Step("uv", "curl -LsSf https://astral.sh/uv/install.sh | sh", 600),
        Step("python", f"{UV} python install 3.12", 600),
        Step("venv", f"{UV} venv --python 3.12 --seed --allow-existing {q_venv}", 600),
        Step("maxtext", f"UV_TORCH_BACKEND={shlex.quote(config.torch_backend)} {UV} pip install "
                        f"--python {q_venv}/bin/python "
                        f"{shlex.quote(f'maxtext[tpu-post-train]=={config.maxtext_version}')} --resolution=lowest",
             3600),
    ]
    if config.install_post_train_extras:
        steps.append(Step("post-train-extras", f". {q_venv}/bin/activate && install_tpu_post_train_extra_deps", 3600))
    return BootstrapSpec(tuple(steps))


def is_current(conn: Connection, spec: BootstrapSpec) -> bool:
    """One round trip: does the host already hold exactly this spec's installation?"""
    path = shlex.quote(f"{conn.target.state_dir}/bootstrap/fingerprint")
    return run(conn, f"cat -- {path} 2>/dev/null; true").stdout.strip() == spec.fingerprint


def bootstrap(conn: Connection, spec: BootstrapSpec, *, stream: TextIO | None = None) -> BootstrapResult:
    """Bring the host to `spec`: nothing at all if its fingerprint is already there, else each step not yet
    done, in order, then the fingerprint. Step output goes to `stream` as it arrives, if given. A failing
    step raises `CommandFailed` naming it (a timeout `Unreachable`) and leaves no fingerprint."""
    if is_current(conn, spec):
        log.info("%s: bootstrap %s… already done", conn.host, spec.fingerprint[:12])
        return BootstrapResult(conn.host, False, (), spec.fingerprint)
    base = f"{conn.target.state_dir}/bootstrap"
    q_base = shlex.quote(base)
    run(conn, f"mkdir -p -- {q_base}/done")
    ran = []
    for step, digest in zip(spec.steps, spec.step_hashes(), strict=True):
        marker = shlex.quote(f"{base}/done/{digest}")
        # The check is inside the lock: the leftovers of an interrupted run may still be finishing this step.
        script = (
            f"exec 9>>{q_base}/lock && flock 9 && if [ -e {marker} ]; then echo {_SKIPPED}; "
            f"else ( {step.command} ) && : > {marker}.tmp && mv -- {marker}.tmp {marker}; fi"
        )
        log.info("%s: bootstrap step %s", conn.host, step.name)
        try:
            result = run(conn, script, env=spec.env, timeout=step.timeout_s, stream=stream)
        except CommandFailed as failed:
            raise CommandFailed(failed.host, failed.exited, failed.tail, what=f"bootstrap step {step.name}") from None
        if _SKIPPED not in result.stdout:
            ran.append(step.name)
    fp = shlex.quote(f"{base}/fingerprint")
    run(conn, f"printf %s {spec.fingerprint} > {fp}.$$ && mv -- {fp}.$$ {fp}")
    log.info("%s: bootstrap %s… complete (ran: %s)", conn.host, spec.fingerprint[:12], ", ".join(ran) or "nothing")
    return BootstrapResult(conn.host, True, tuple(ran), spec.fingerprint)


def bootstrap_all(target: Target, spec: BootstrapSpec, *,
                  stream: TextIO | None = None) -> dict[str, BootstrapResult | RemoteError]:
    """`bootstrap` on every host of the target in parallel; each host's result, or the error that stopped it."""

    def one(host: str):
        try:
            with connect(target, host) as conn:
                return bootstrap(conn, spec, stream=stream)
        except RemoteError as e:
            return e

    with ThreadPoolExecutor(max_workers=len(target.hosts)) as pool:
        return dict(zip(target.hosts, pool.map(one, target.hosts), strict=True))
