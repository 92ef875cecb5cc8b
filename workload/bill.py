"""What the VM has cost so far, measured on the VM: its chips × the time since it booted × the price per
chip-hour the Pulumi program wrote into its metadata (`tpu-sft-usd-per-chip-hour`).

The time is /proc/uptime: this boot of the VM, which is what a running VM is billed for since it last started
(a VM stopped by autostop and started again by `pulumi up` starts a new count; its earlier boots are not
added). Off Google Cloud (the rehearsal, tests) there is no metadata server: then there is no price and no
cost, only chip-hours. The price travels in the VM's metadata, not in a phase's inputs, so a price change
re-runs no phase.
"""

from __future__ import annotations

import os
from typing import Any

from workload.autostop import ApiError, Cloud
from workload.core.contract import PRICE_KEY
from workload.progress import duration

UPTIME = "/proc/uptime"


def uptime_s(path: str = UPTIME) -> float:
    with open(path, encoding="ascii") as f:
        return float(f.read().split()[0])


def price_per_chip_hour(cloud: Cloud) -> float | None:
    """The price the program set, or None off Google Cloud (no metadata server) or without the key."""
    try:
        raw = cloud.metadata(f"instance/attributes/{PRICE_KEY}")
        return float(raw) if raw is not None else None
    except (ApiError, ValueError):
        return None


class Meter:
    """The bill so far: the price is read once (a short timeout: off Google Cloud the metadata name does not
    resolve), the uptime at every reading."""

    def __init__(self, chips: int, cloud: Cloud | None = None, uptime_path: str = UPTIME):
        self.chips, self.uptime_path = chips, uptime_path
        self.usd_per_chip_hour = price_per_chip_hour(cloud or Cloud.from_env(dict(os.environ), timeout_s=2.0))

    def reading(self) -> dict[str, Any]:
        up = uptime_s(self.uptime_path)
        chip_hours = round(self.chips * up / 3600, 3)
        cost = None if self.usd_per_chip_hour is None else round(chip_hours * self.usd_per_chip_hour, 2)
        return {
            "vm_up_s": round(up),
            "chips": self.chips,
            "chip_hours": chip_hours,
            "usd_per_chip_hour": self.usd_per_chip_hour,
            "cost_usd": cost,
        }


def describe(bill: dict[str, Any]) -> str:
    """One line for the end of a phase's output."""
    line = (
        f"bill: this VM has been up {duration(bill['vm_up_s'])} since it booted × {bill['chips']} chips = "
        f"{bill['chip_hours']:g} chip-hours"
    )
    if bill.get("cost_usd") is not None:
        line += f" ≈ ${bill['cost_usd']:.2f} at ${bill['usd_per_chip_hour']:.2f} per chip-hour"
    return line
