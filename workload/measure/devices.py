"""Which chips a trainer ran on, as JAX itself names them, so that its MFU is measured against their own peak.

MaxText logs its backend as `platform_version`, which on a TPU reads "PJRT C API" and names no generation (the
TPU v5e chip's log: tests/workload/measure/fixtures/). The trainer's launcher prints one line of its own as soon as
MaxText has started JAX's backend (after `print_system_information`, which starts it): the host's devices' count, their
`device_kind` ("TPU v5 lite", "TPU v6 lite", "cpu") and platform. workload/measure/throughput.py reads it back.

Standard library only: the runner parses the line without JAX.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

PREFIX = "tpu-sft devices:"
_LINE = re.compile(rf"{PREFIX} (\d+) x (.+) \((\w+)\)$")


def line(devices: Iterable[Any]) -> str:
    """What the launcher prints for these devices (jax.local_devices()); a host's devices are all of one kind."""
    devices = list(devices)
    first = devices[0]
    return f"{PREFIX} {len(devices)} x {first.device_kind} ({first.platform})"


def parse(text: str) -> dict[str, Any] | None:
    """{"device_count", "device_kind", "platform"} from the launcher's line; None for any other line."""
    found = _LINE.search(text.rstrip())
    if found is None:
        return None
    return {"device_count": int(found[1]), "device_kind": found[2], "platform": found[3]}
