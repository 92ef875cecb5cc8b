"""What the VM has cost so far, measured on the VM: its chips × the time since it booted × the price per
chip-hour the Pulumi program wrote into its metadata (`tpu-sft-usd-per-chip-hour`). On a slice each host measures
its own chips and uptime, and the phase adds the hosts' readings up (`total`): a host the group recreated counts
from its own boot, not the slice's.

The time is /proc/uptime: this boot of the VM, which is what a running VM is billed for since it last started (a VM
restarted after host maintenance, or one made anew after autostop deleted the last, starts a new count; earlier
boots are not added). Off Google Cloud (the rehearsal, tests) there is no metadata server: then there is no price
and no cost, only chip-hours. The price travels in the VM's metadata, not in a phase's inputs, so a price change re-
runs no phase.
"""

from __future__ import annotations

import os
from typing import Any

from workload.core.contract import PRICE_KEY
from workload.core.duration import duration
from workload.spend.autostop import ApiError, Cloud

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
    """This host's bill so far: the price is read once (a short timeout: off Google Cloud the metadata name does not
    resolve), the uptime at every reading. `hosts`: how many hosts carry the chips, each with `chips` of them."""

    def __init__(self, chips: int, cloud: Cloud | None = None, uptime_path: str = UPTIME, hosts: int = 1):
        self.chips, self.uptime_path, self.hosts = chips, uptime_path, hosts
        self.usd_per_chip_hour = price_per_chip_hour(cloud or Cloud.from_env(dict(os.environ), timeout_s=2.0))

    def cost_so_far(self) -> float | None:
        """The whole VM's or slice's cost for a progress line: every host counted as up as long as this one (the
        exact sum of every host's reading is the phase's last line)."""
        cost = self.reading()["cost_usd"]
        return None if cost is None else round(cost * self.hosts, 2)

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


def total(bills: list[dict[str, Any]]) -> dict[str, Any]:
    """A slice's bill: every host's reading added up; `vm_up_s` is the longest any host has been up. The cost is
    known only when every host knew its price."""
    costs = [b.get("cost_usd") for b in bills]
    return {
        "hosts": len(bills),
        "vm_up_s": max(b["vm_up_s"] for b in bills),
        "chips": sum(b["chips"] for b in bills),
        "chip_hours": round(sum(b["chip_hours"] for b in bills), 3),
        "usd_per_chip_hour": bills[0].get("usd_per_chip_hour"),
        "cost_usd": None if None in costs else round(sum(c for c in costs if c is not None), 2),
    }


def describe(bill: dict[str, Any]) -> str:
    """One line for the end of a phase's output."""
    if "hosts" in bill:  # a slice's (total)
        line = (
            f"bill: {bill['hosts']} hosts, the longest up {duration(bill['vm_up_s'])} since it booted, "
            f"{bill['chips']} chips in all = {bill['chip_hours']:g} chip-hours"
        )
    else:
        line = (
            f"bill: this VM has been up {duration(bill['vm_up_s'])} since it booted × {bill['chips']} chips = "
            f"{bill['chip_hours']:g} chip-hours"
        )
    if bill.get("unread"):
        line += f" (not counted: {', '.join(bill['unread'])}, whose reading could not be read)"
    if bill.get("cost_usd") is not None:
        line += f" ≈ ${bill['cost_usd']:.2f} at ${bill['usd_per_chip_hour']:.2f} per chip-hour"
    return line
