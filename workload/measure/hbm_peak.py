"""The HBM a chip really held while it trained, to set beside the preflight's figure (docs/preflight.md).

The trainer's launcher reads JAX's `memory_stats()` of each of its host's devices as the trainer ends (ended
well or not) and prints one line; the train step reads that line into the attempt's record, and the train
summary keeps the largest peak of any attempt. A TPU reports `peak_bytes_in_use` and `bytes_limit` per chip, the
allocator's own figures; a CPU device reports nothing (`memory_stats()` is None), so off a TPU the line and the
summary say that instead of a figure. On a slice the summary is worker 0's chips': every chip runs the same
program on its share.

Standard library only: the runner parses the line without JAX.
"""

from __future__ import annotations

import re
from typing import Any, Iterable

PREFIX = "tpu-sft hbm:"
_MEASURED = re.compile(rf"{PREFIX} peak_bytes_in_use=(\d+) bytes_limit=(\d+) devices=(\d+)")
_NONE = re.compile(rf"{PREFIX} none: (.+)")


def line(devices: Iterable[Any]) -> str:
    """What the launcher prints for these devices (jax.local_devices())."""
    devices = list(devices)
    stats = [s for s in (device.memory_stats() for device in devices) if s and "peak_bytes_in_use" in s]
    if not stats:
        platforms = ", ".join(sorted({device.platform for device in devices})) or "no"
        return f"{PREFIX} none: {platforms} devices report no memory statistics"
    peak = max(s["peak_bytes_in_use"] for s in stats)
    limit = min(s.get("bytes_limit", 0) for s in stats)
    return f"{PREFIX} peak_bytes_in_use={peak} bytes_limit={limit} devices={len(stats)}"


def parse(text: str) -> dict[str, Any] | None:
    """The attempt record's facts from the launcher's line; None for any other line."""
    if found := _MEASURED.search(text):
        return {"hbm_peak_bytes_per_chip": int(found[1]), "hbm_bytes_limit_per_chip": int(found[2])}
    if found := _NONE.search(text):
        return {"hbm_reason": found[1]}
    return None


def summary(attempts: list[dict]) -> dict[str, Any]:
    """The train summary's figure: the largest peak of any attempt, with the chip's limit, or why there is none."""
    measured = [a for a in attempts if a.get("hbm_peak_bytes_per_chip") is not None]
    if measured:
        peak = max(measured, key=lambda a: a["hbm_peak_bytes_per_chip"])
        return {k: peak[k] for k in ("hbm_peak_bytes_per_chip", "hbm_bytes_limit_per_chip")}
    reasons = [a["hbm_reason"] for a in attempts if a.get("hbm_reason")]
    reason = reasons[-1] if reasons else "the trainer reported no memory statistics"
    return {"hbm_peak_bytes_per_chip": None, "hbm_reason": reason}
