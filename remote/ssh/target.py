"""Where the remote layer connects to, as one frozen, validated value (JSON in and out).

The CLI reads it from the `TPU_SFT_TARGET` environment variable (this JSON) or from flags; the Pulumi
program writes the JSON. Keys are the field names below, and those a subclass adds (the pipeline's host profile:
remote/pipeline/target.py). Paths are local paths on the machine that runs the CLI, except `state_dir`, which is
on the host (relative paths are relative to the user's home).
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping, Self

from remote.ssh.errors import TargetError
from workload.core.contract import STATE_DIR

_HOST = re.compile(r"[A-Za-z0-9_.:-]{1,253}")  # hostnames, IPv4/IPv6 literals, GCE instance names
_USER = re.compile(r"[a-z_][a-z0-9_.-]{0,31}")
_INSTANCE_ID = re.compile(r"[0-9]{1,20}")  # Compute Engine's instance ids: unsigned 64-bit integers, in decimal


@dataclass(frozen=True)
class Target:
    host: str  # address, or the instance name when `gateway` is an IAP tunnel (it becomes %h)
    user: str
    key_path: str  # private key file (no passphrase)
    known_hosts: str  # pinned host keys; keys on non-22 ports are stored as "[host]:port"
    port: int = 22
    gateway: str | None = None  # a ProxyCommand, e.g. "gcloud compute start-iap-tunnel NAME %p --listen-on-stdin …"
    trust_on_first_use: bool = False  # record an unknown host key instead of refusing (a changed key is always refused)
    # (host, instance id) pairs: a host whose id is not the one recorded beside known_hosts is a new machine under
    # the old name, and its old key is forgotten (remote/ssh/host_ids.py). JSON: an object, host → id.
    host_ids: tuple[tuple[str, str], ...] = ()
    workers: tuple[str, ...] = ()  # further hosts of a multi-host slice, reached with the same user, key and port
    connect_timeout: float = 10.0  # TCP connect, SSH banner and authentication, each
    command_timeout: float = 120.0  # any short control command; long installs set their own
    keepalive_s: int = 15  # SSH keepalive interval, so NATs and IAP do not drop an idle follow
    state_dir: str = STATE_DIR  # on the host: jobs/ and bootstrap/ live here

    def __post_init__(self) -> None:
        _check_host("host", self.host)
        # Local paths as a shell reads them: the Pulumi program passes "~/.ssh/…" so that stack state is the
        # same on every machine, and neither paramiko nor open() expands "~".
        for name in ("key_path", "known_hosts"):
            if isinstance(getattr(self, name), str):
                object.__setattr__(self, name, os.path.expanduser(getattr(self, name)))
        if not isinstance(self.user, str) or not _USER.fullmatch(self.user):
            raise TargetError("user", f"{self.user!r} is not a login name", 'set "user" to e.g. "ubuntu"')
        for name in ("key_path", "known_hosts"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise TargetError(name, "is empty", f'set "{name}" to a local file path')
        if isinstance(self.port, bool) or not isinstance(self.port, int) or not 1 <= self.port <= 65535:
            raise TargetError("port", f"{self.port!r} is not a TCP port", 'set "port" to 1–65535 (usually 22)')
        if self.gateway is not None and (not isinstance(self.gateway, str) or not self.gateway.strip()):
            raise TargetError("gateway", "is empty", 'omit "gateway" or give a ProxyCommand using %h and %p')
        if not isinstance(self.trust_on_first_use, bool):
            raise TargetError(
                "trust_on_first_use", f"{self.trust_on_first_use!r} is not true/false", "use true or false"
            )
        if not isinstance(self.workers, tuple):
            raise TargetError("workers", f"{self.workers!r} is not a list", 'give "workers" as a JSON list of hosts')
        for worker in self.workers:
            _check_host("workers", worker)
        if len(set(self.hosts)) != len(self.hosts):
            raise TargetError("workers", "lists a host twice", "list each worker once, without the main host")
        self._check_host_ids()
        for name in ("connect_timeout", "command_timeout"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 86400:
                raise TargetError(name, f"{value!r} is not a positive number of seconds", f'set "{name}" to e.g. 10')
        if isinstance(self.keepalive_s, bool) or not isinstance(self.keepalive_s, int) or self.keepalive_s < 1:
            raise TargetError(
                "keepalive_s", f"{self.keepalive_s!r} is not a whole number ≥ 1", 'set "keepalive_s" to 15'
            )
        if (
            not isinstance(self.state_dir, str)
            or not self.state_dir
            or not self.state_dir.isprintable()
            or self.state_dir[0] in "-~"
        ):
            raise TargetError(
                "state_dir",
                f"{self.state_dir!r} is not a usable path",
                'set "state_dir" to an absolute path or one relative to the home directory (no ~), e.g. ".tpu-sft"',
            )

    def _check_host_ids(self) -> None:
        if not isinstance(self.host_ids, tuple) or not all(
            isinstance(pair, tuple) and len(pair) == 2 for pair in self.host_ids
        ):
            raise TargetError("host_ids", f"{self.host_ids!r} is not an object", 'give "host_ids" as {"host": "id"}')
        for host, instance_id in self.host_ids:
            if host not in self.hosts:
                raise TargetError("host_ids", f"names {host!r}, not a host of the target", "name the target's hosts")
            if not isinstance(instance_id, str) or not _INSTANCE_ID.fullmatch(instance_id):
                raise TargetError("host_ids", f"{instance_id!r} is not an instance id", "give the instance's id")
        if self.host_ids and not self.trust_on_first_use:
            raise TargetError(
                "host_ids",
                "needs trust_on_first_use: a new instance's key can only be recorded on first use",
                'set "trust_on_first_use" to true, or omit "host_ids"',
            )

    @property
    def hosts(self) -> tuple[str, ...]:
        return (self.host, *self.workers)

    def led_by(self, host: str) -> Self:
        """The same hosts with `host` first: a slice's worker 0, where a follow that lost its link reconnects."""
        if host not in self.hosts:
            raise ValueError(f"{host} is not a host of this target")
        return dataclasses.replace(self, host=host, workers=tuple(h for h in self.hosts if h != host))

    def host_id(self, host: str) -> str | None:
        """The instance id the target gives for `host`, if any."""
        return dict(self.host_ids).get(host)

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> Self:
        if not isinstance(raw, Mapping):
            raise TargetError("(whole)", f"expected a JSON object, got {type(raw).__name__}", "give a JSON object")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise TargetError(unknown[0], "is not a target field", f"use only {', '.join(sorted(known))}")
        missing = [name for name in ("host", "user", "key_path", "known_hosts") if raw.get(name) in (None, "")]
        if missing:
            raise TargetError(missing[0], "is missing", f'add "{missing[0]}" to the target')
        return cls(**cls._from_json_values({k: v for k, v in raw.items() if v is not None}))

    @classmethod
    def _from_json_values(cls, values: dict[str, Any]) -> dict[str, Any]:
        """The fields' values as JSON gives them, turned into the fields' types (a subclass adds its own)."""
        if isinstance(values.get("workers"), list):
            values["workers"] = tuple(values["workers"])
        if isinstance(values.get("host_ids"), Mapping):
            values["host_ids"] = tuple(sorted(values["host_ids"].items()))
        return values

    @classmethod
    def from_json(cls, text: str) -> Self:
        try:
            raw = json.loads(text)
        except json.JSONDecodeError as e:
            raise TargetError("(whole)", f"not valid JSON ({e.msg} at character {e.pos})", "fix the JSON") from None
        return cls.from_mapping(raw)

    def to_json(self) -> str:
        plain = asdict(self)
        plain["workers"] = list(self.workers)
        plain["host_ids"] = dict(self.host_ids)
        return json.dumps(plain, sort_keys=True)


def _check_host(name: str, value: Any) -> None:
    if not isinstance(value, str) or not _HOST.fullmatch(value):
        raise TargetError(name, f"{value!r} is not a host name or address", f'set "{name}" to e.g. "10.0.0.2"')
