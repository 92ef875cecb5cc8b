"""Rules on the TPU VM itself: its reservation, boot disk and run-time cap; and on a slice's hosts, through the
instance template they are made from (same scheduling and reservation fields; the boot disk is in `disks`) and
the managed instance group that keeps them."""

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


def boot_disk_size(props: Mapping[str, Any]) -> Any:
    """An instance's `bootDisk.initializeParams.size`, or an instance template's boot entry of `disks`."""
    if "disks" in props:
        boot = [disk for disk in items(dig(props, "disks")) if dig(disk, "boot", default=False)]
        return dig(boot[0], "diskSizeGb") if boot else None
    return dig(props, "bootDisk", "initializeParams", "size")


def boot_disk_too_small(name: str, props: Mapping[str, Any], minimum_gb: int = MAXTEXT_BOOT_DISK_GB) -> list[str]:
    size = boot_disk_size(props)
    if size is not None and float(size) >= minimum_gb:
        return []
    shown = "the image's default (10 GB)" if size is None else f"{float(size):g} GB"
    return [
        f"instance {name}'s boot disk is {shown}, below the {minimum_gb} GB MaxText's install and checkpoints "
        f"need: pulumi config set tpu-sft:bootDiskSizeGb {minimum_gb}"
    ]


def run_duration_uncapped(name: str, props: Mapping[str, Any]) -> list[str]:
    """A VM Google never ends bills until someone deletes it; a reservation-bound one ends with its reservation, which
    bills its whole period anyway (infra/pricing/run_cap.py says why it gets no cap by default)."""
    seconds = dig(props, "scheduling", "maxRunDuration", "seconds")
    if seconds is not None and float(seconds) > 0:
        return []
    if dig(props, "scheduling", "provisioningModel") == "RESERVATION_BOUND":
        return []
    return [
        f"instance {name} has no run-duration cap, so a forgotten VM bills until someone deletes it: "
        "pulumi config set tpu-sft:maxRunHours <hours>"
    ]


RECREATE_NOTHING = "DO_NOTHING"


def keeps_one_vm_and_its_disk(props: Mapping[str, Any]) -> bool:
    """A group of one VM that is no slice and keeps its data disk across recreations (infra/resources/vm_group.py):
    the one group whose repair is wanted, ended by autostop's resize to 0 and the run's boot-resume budget."""
    kept = [d for d in items(dig(props, "statefulDisks")) if str(dig(d, "deleteRule", default="")).upper() == "NEVER"]
    size = dig(props, "targetSize")
    one = isinstance(size, (int, float)) and float(size) == 1  # the engine's numbers arrive as floats
    return one and bool(kept) and not dig(props, "resourcePolicies", "workloadPolicy")


def group_recreates_ended_hosts(name: str, props: Mapping[str, Any]) -> list[str]:
    """A MIG repairs (recreates) a VM that fails unless told not to: a slice's host Google ended at its run cap, by
    preemption or at the reservation's end would come back and bill again. The exception: a group of one VM that
    keeps its data disk, whose repair is what tpu-sft:recovery auto asks for."""
    action = dig(props, "instanceLifecyclePolicy", "defaultActionOnFailure", default="REPAIR")
    if str(action).upper() == RECREATE_NOTHING or keeps_one_vm_and_its_disk(props):
        return []
    return [
        f"instance group {name} recreates hosts that Google ended ({action}), so a run cap or preemption would "
        f"not stop the bill: set instanceLifecyclePolicy.defaultActionOnFailure {RECREATE_NOTHING} "
        "(infra/resources/slice.py), or make it a group of one that keeps its data disk (infra/resources/vm_group.py)"
    ]
