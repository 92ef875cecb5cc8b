"""A bootstrap spec: the install steps for a host, as a small graph (each step names the steps it needs), with
its JSON form and its hashes. The hashes name the host's done-markers and fingerprint (scheduler.py); how
bootstrap uses them: ARCHITECTURE.md, "Reaching a new VM"."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from dataclasses import dataclass, field
from typing import Any

from remote.ssh.connection import env_prefix
from remote.ssh.errors import BadInput

_SPEC_SHAPE = '{"steps": [{"name": …, "command": …, "timeout_s": …, "after": [names], "detached": false}], "env": {…}}'


@dataclass(frozen=True)
class Step:
    name: str
    command: str  # run by /bin/sh on the host, from the home directory; must be safe to run again
    timeout_s: float = 3600.0  # not part of the fingerprint: changing it changes nothing installed
    # The steps this one needs, all listed before it; None: the step listed just before it (the first: nothing).
    after: tuple[str, ...] | None = None
    # May be left running in its own session (scheduler.py `bootstrap`, `leave_running`; why: ARCHITECTURE.md,
    # "Reaching a new VM"). Only a detached step may need a detached step. Not part of the fingerprint: where it
    # runs changes nothing installed.
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
            after = tuple(step.after) if step.after is not None else tuple(names[number - 1 : number])
            unknown = [name for name in after if name not in names[:number]]
            if unknown:
                raise BadInput(
                    f"bootstrap spec: step {step.name!r} needs {unknown[0]!r}, which is not a step listed before it"
                )
            detached = [name for name in after if self.steps[names.index(name)].detached]
            if detached and not step.detached:
                raise BadInput(
                    f"bootstrap spec: step {step.name!r} needs {detached[0]!r}, which is detached: "
                    f"make {step.name!r} detached too, or {detached[0]!r} not"
                )
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
        raise BadInput(
            f"bootstrap spec: step {number} must be an object with name, command, timeout_s, after and detached"
        )
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
