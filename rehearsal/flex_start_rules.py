"""What a flex-start (DWS) VM must say about itself, as Compute Engine would take its create request: the mock engine
(rehearsal/engine.py) refuses a FLEX_START instance or instance template that leaves one out, and the program's run
fails as a provider error does.

Enforced, each with where it was read (through the search tool, 2026-12-05):
- a run duration, at most seven days, and a termination action: "Flex-start VMs can run for up to seven days. After
  that time, Compute Engine automatically stops or deletes the VMs based on the termination action that is specified
  in the VM properties" ("About Flex-start VMs", cloud.google.com/compute/docs/instances/about-flex-start-vms). tpu-sft
  asks for DELETE: a stopped TPU VM cannot be restarted and would keep billing its disks (docs/checkpoints.md);
- no reservation: flex-start capacity comes from DWS's pool, not a reservation ("Create a Flex-start VM",
  cloud.google.com/compute/docs/instances/create-flex-start-vm, whose gcloud form passes `--reservation-affinity=none`;
  the stored copy's command was cut off, so this is also from the provider's own flex-start example,
  pulumi-gcp `RegionResizeRequest`: reservation affinity `NO_RESERVATION`, as infra/resources/flex_start.py quotes it);
- host maintenance TERMINATE and no automatic restart: as the brief of issue 51 lists them for flex-start VMs; Google's
  own words on these two were not read here (the stored pages were cut off before them).

The refusal's wording is the stand-in's, not Google's: no real error of Compute Engine's for these was found.

`FlexStartCapacity` stands in for Compute Engine answering a single flex-start VM's create request late: after
`fills_after_s` it makes the VM. A provider that waits less (its create timeout, 20 minutes unless the resource sets
`customTimeouts`: terraform-provider-google resource_compute_instance.go) fails the create with its wait's timeout and
drops the id (`d.SetId("")`), and the VM is made anyway, outside the state; `getInstance` then finds it.

Not enforced: the window in which the request waits for capacity (`--request-valid-for-duration`): pulumi-gcp 10.2.0's
Instance has no such field (its InstanceSchedulingArgs, read in the installed SDK), so the program cannot send one,
and Google's default for it was not found.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

INSTANCE = "gcp:compute/instance:Instance"
TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
FLEX_START = "FLEX_START"
SEVEN_DAYS_S = 7 * 24 * 3600


def refusals(state: dict[str, Any]) -> list[str]:
    """What Compute Engine would refuse in a FLEX_START instance's (or template's) scheduling and reservation
    affinity; nothing for any other provisioning model."""
    scheduling = state.get("scheduling") or {}
    if scheduling.get("provisioningModel") != FLEX_START:
        return []
    wrong = []
    seconds = int((scheduling.get("maxRunDuration") or {}).get("seconds") or 0)
    if not 0 < seconds <= SEVEN_DAYS_S:
        wrong.append(f"maxRunDuration must be set, at most {SEVEN_DAYS_S} s (seven days), got {seconds or 'none'}")
    if scheduling.get("instanceTerminationAction") != "DELETE":
        wrong.append("instanceTerminationAction must be DELETE (tpu-sft: a stopped TPU VM cannot be restarted)")
    if (state.get("reservationAffinity") or {}).get("type") != "NO_RESERVATION":
        wrong.append("reservationAffinity must be NO_RESERVATION")
    if scheduling.get("onHostMaintenance") != "TERMINATE":
        wrong.append("onHostMaintenance must be TERMINATE")
    if scheduling.get("automaticRestart") is not False:
        wrong.append("automaticRestart must be false")
    return wrong


def refuse_an_incomplete_flex_start_vm(typ: str, state: dict[str, Any]) -> None:
    if typ not in (INSTANCE, TEMPLATE):
        return
    wrong = refusals(state)
    if wrong:
        raise ValueError(f"googleapi: Error 400: invalid FLEX_START request: {'; '.join(wrong)}., badRequest")


def provider_id(project: str, zone: str, name: str) -> str:
    """An instance's id as pulumi-gcp gives it (and `import` takes it): its path."""
    return f"projects/{project}/zones/{zone}/instances/{name}"


PROVIDER_CREATE_TIMEOUT_S = 20 * 60  # the provider's default for an instance's create


def timeout_s(pulumi_timeout: str | None) -> float:
    """A Pulumi custom timeout ("130m", "2h", "90s": Go's duration syntax) in seconds (unset: the provider's)."""
    if not pulumi_timeout:
        return PROVIDER_CREATE_TIMEOUT_S
    units = {"h": 3600, "m": 60, "s": 1}
    return sum(float(n) * units[u] for n, u in re.findall(r"([0-9.]+)([hms])", pulumi_timeout))


@dataclass
class FlexStartCapacity:
    """Compute Engine filling flex-start requests `fills_after_s` after they are made, and the VMs it made."""

    fills_after_s: float
    project: str
    made: dict[str, str] = field(default_factory=dict)  # the provider's id of each VM, by name

    def create(self, name: str, zone: str, create_timeout: str | None) -> None:
        """The provider's create of a flex-start VM: returns once the VM is made, or raises the provider's error
        where its wait ends first, and the VM is made later all the same."""
        self.made[name] = provider_id(self.project, zone, name)
        waited = timeout_s(create_timeout)
        if self.fills_after_s > waited:
            raise ValueError(
                "Error waiting for instance to create: timeout while waiting for state to become 'DONE' "
                f"(last state: 'RUNNING', timeout: {create_timeout or '20m0s'})"
            )
