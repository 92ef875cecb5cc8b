"""A host's instance id as the evidence that its new host key is a new machine, not an attack.

A slice's host that its managed instance group recreates keeps its name and gets a new instance and a new host
key. A changed key alone is always refused (remote/ssh/connection.py); a new instance id, which the Pulumi program
reads from Compute Engine, is what allows it. Beside known_hosts, `<known_hosts>.ids` records the id each host had
when its key was recorded; when the target gives another, that host's key is forgotten (and logged), and trust on
first use records the new one. Every other host's key stays pinned.
"""

from __future__ import annotations

import fcntl
import json
import logging
import os

from remote.ssh.errors import TargetError

log = logging.getLogger("remote")


def ids_path(known_hosts: str) -> str:
    return f"{known_hosts}.ids"


def forget_if_rebuilt(known_hosts: str, name: str, instance_id: str) -> str | None:
    """Record that `name` (as known_hosts names it) is instance `instance_id`; if another id was recorded for it,
    remove its keys from `known_hosts` first. Returns the id it was before, when it changed. Under known_hosts'
    lock, which recording a new key takes too: workers connect in parallel."""
    os.makedirs(os.path.dirname(os.path.abspath(known_hosts)), mode=0o700, exist_ok=True)
    with open(known_hosts, "a+") as keys:
        fcntl.flock(keys, fcntl.LOCK_EX)
        recorded = _read_ids(ids_path(known_hosts))
        before = recorded.get(name)
        if before == instance_id:
            return None
        if before is not None:
            keys.seek(0)
            kept = [line for line in keys.readlines() if name not in _names(line)]
            keys.truncate(0)
            keys.writelines(kept)
            keys.flush()
            log.warning(
                "%s: a new instance (id %s, was %s): its old host key is forgotten, the new one recorded on first use",
                name,
                instance_id,
                before,
            )
        _write_ids(ids_path(known_hosts), {**recorded, name: instance_id})
    return before


def _names(line: str) -> list[str]:
    """The host names of a plain known_hosts line ("name1,name2 type key"). A comment's or a marker's first field
    ("#…", "@revoked", "@cert-authority") is no host's name, so those lines are always kept: what revokes a key
    must outlive any instance."""
    fields = line.split()
    return fields[0].split(",") if fields else []


def _read_ids(path: str) -> dict[str, str]:
    try:
        with open(path) as f:
            recorded = json.load(f)
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as e:
        recorded = e
    if not isinstance(recorded, dict):
        raise TargetError("known_hosts", f"{path} is not a JSON object of instance ids", "remove it to start again")
    return recorded


def _write_ids(path: str, recorded: dict[str, str]) -> None:
    partial = f"{path}.partial"
    with open(partial, "w") as f:
        json.dump(recorded, f)
    os.replace(partial, path)
