"""Rules on the TPU VM itself: its reservation, boot disk and run-time cap."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy.model import dig, items

RESERVATION_KEY = "compute.googleapis.com/reservation-name"
MAXTEXT_BOOT_DISK_GB = 200  # the seed's size: MaxText's venv (~10 GB), the HF cache and checkpoint staging


def reservation_missing(name: str, props: Mapping[str, Any]) -> list[str]:
    """A RESERVATION_BOUND VM must name its reservation, or Google rejects (or mis-places) it."""
    if dig(props, "scheduling", "provisioningModel") != "RESERVATION_BOUND":
        return []
    affinity = dig(props, "reservationAffinity", default={})
    values = [v for v in items(dig(affinity, "specificReservation", "values")) if str(v)]
    if dig(affinity, "type") != "SPECIFIC_RESERVATION":
        problem = f"its reservation affinity is {dig(affinity, 'type', default='unset')}, not SPECIFIC_RESERVATION"
    elif dig(affinity, "specificReservation", "key") != RESERVATION_KEY:
        problem = f"its specific reservation key is not {RESERVATION_KEY}"
    elif not values:
        problem = "it names no reservation"
    else:
        return []
    return [
        f"instance {name} is RESERVATION_BOUND but {problem}: "
        "set tpu-sft:reservation to the name of your capacity reservation"
    ]


def boot_disk_too_small(name: str, props: Mapping[str, Any], minimum_gb: int = MAXTEXT_BOOT_DISK_GB) -> list[str]:
    size = dig(props, "bootDisk", "initializeParams", "size")
    if size is not None and float(size) >= minimum_gb:
        return []
    shown = "the image's default (10 GB)" if size is None else f"{float(size):g} GB"
    return [
        f"instance {name}'s boot disk is {shown}, below the {minimum_gb} GB MaxText's install and checkpoints "
        f"need: pulumi config set tpu-sft:bootDiskSizeGb {minimum_gb}"
    ]


def run_duration_uncapped(name: str, props: Mapping[str, Any]) -> list[str]:
    seconds = dig(props, "scheduling", "maxRunDuration", "seconds")
    if seconds is not None and float(seconds) > 0:
        return []
    return [
        f"instance {name} has no run-duration cap, so a forgotten VM bills until someone deletes it: "
        "pulumi config set tpu-sft:maxRunHours <hours>"
    ]
