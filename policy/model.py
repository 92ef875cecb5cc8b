"""What a rule sees of a resource, and what it reports."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

INSTANCE = "gcp:compute/instance:Instance"
DISK = "gcp:compute/disk:Disk"
FIREWALL = "gcp:compute/firewall:Firewall"
BUCKET = "gcp:storage/bucket:Bucket"
# A multi-host slice: its hosts come from an instance template through a managed instance group.
INSTANCE_TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
INSTANCE_GROUP_MANAGER = "gcp:compute/instanceGroupManager:InstanceGroupManager"
HOSTS = (INSTANCE, INSTANCE_TEMPLATE)  # what declares a TPU host's own fields (scheduling, disks, labels)


@dataclass(frozen=True)
class Resource:
    """A declared resource: its type token, name and input properties (camelCase, as the engine sends them).

    `protect` and `retain_on_delete` are the resource options that decide whether a replace deletes it.
    """

    type: str
    name: str
    props: Mapping[str, Any] = field(default_factory=dict)
    protect: bool = False
    retain_on_delete: bool = False
    urn: str = ""


@dataclass(frozen=True)
class Violation:
    policy: str
    level: str  # "mandatory" blocks the preview/update; "advisory" only warns
    resource: str
    message: str

    def __str__(self) -> str:
        return f"[{self.level}] {self.policy} ({self.resource}): {self.message}"


def dig(props: Mapping[str, Any], *path: str | int, default: Any = None) -> Any:
    """`props[a][b][0]…`, or `default` where any step is missing.

    Works on plain dicts and lists and on CrossGuard's unknown-checking proxies (which are Mappings and
    Sequences, not dicts and lists).
    """
    value: Any = props
    for step in path:
        if isinstance(step, int):
            if not isinstance(value, Sequence) or isinstance(value, str) or step >= len(value):
                return default
            value = value[step]
        else:
            if not isinstance(value, Mapping) or step not in value:
                return default
            value = value[step]
        if value is None:
            return default
    return value


def items(value: Any) -> list[Any]:
    """A list property as a list; absent or null counts as empty."""
    if isinstance(value, Sequence) and not isinstance(value, str):
        return list(value)
    return []
