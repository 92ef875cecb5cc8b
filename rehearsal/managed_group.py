"""A stand-in for Compute Engine's managed instance group (MIG) of TPU VMs over time: what it does to its VMs after
the program declared it (infra/resources/vm_group.py's group of one, or a slice's group), built from the group's and
its template's inputs as the mock engine recorded them (rehearsal/engine.py). The mock engine checks the group's
create request; this plays what happens next: Google's preemption or a deletion, autostop's resize, a `pulumi up`'s.

Enforced, each from Google's text:
- Repair with the same name: a VM of a group whose `defaultActionOnFailure` is REPAIR (the API's default) that is
  preempted or deleted by anything but the group is recreated under its name, with a new instance id ("Failure
  recovery of TPU instances": in a MIG with single-host slices the MIG repairs a TPU VM that becomes TERMINATED after
  "an external event, such as Spot VM preemption" and "recreates the instance with the same name"; compute/docs/
  instance-groups/about-repair: a MIG repairs VMs "deleted by an action not initiated by the MIG"). DO_NOTHING (a
  slice's) leaves it ended.
- No repair below the target size's count: a group resized to 0 deletes its VMs and makes none, whatever happens.
- A recreated VM gets a new boot disk (the template's boot disk is made anew, auto-deleted with the old VM); a disk
  the group keeps (its `statefulDisks` names the device, delete rule NEVER) is attached again, the same disk; a
  template disk that is not stateful and auto-deletes is lost with the VM (compute/docs/instance-groups/
  create-mig-with-basic-stateful-disks: a stateful disk "preserves the data on disks with a given device name ... even
  in the event of VM recreation").
- Bulk mode only with a RESERVATION_BOUND or FLEX_START template ("Bulk mode in MIGs is only supported with instance
  templates that specify either a reservation-bound or flex-start provisioning model", compute/docs/instance-groups/
  bulk-create-instances-in-mig), checked here for a group with no accelerator topology; a slice's group is exempt, as
  rehearsal/group_rules.py says why (Google's TPU pages make on-demand and Spot slices in bulk mode).
- No restart of a stopped TPU VM: a start of a `ct6e-*` VM is refused (Compute Engine's stop/start page, as
  tests/workload/gce_standin.py cites it).

Not modelled: capacity (a repair here always finds a host), the delays of preemption notice, deletion and repair,
quotas, health checks, and the group's update of a VM to a new template.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

TPU_MACHINE_TYPES = "ct6e-"
BULK_MODELS = ("RESERVATION_BOUND", "FLEX_START")
BULK_REFUSED = (
    "googleapi: Error 400: Bulk mode in a managed instance group requires an instance template with the "
    "RESERVATION_BOUND or FLEX_START provisioning model., badRequest"
)
START_REFUSED = "googleapi: Error 400: An instance with TPUs attached ({machine_type}) cannot be restarted."


class Refused(Exception):
    """What Compute Engine answers to a request that breaks one of the rules above: a 400."""


def refuse_bulk_without_its_models(group: dict[str, Any], template: dict[str, Any], has_topology: bool) -> None:
    modes = [p.get("mode") for p in group.get("targetSizePolicies") or []]
    model = (template.get("scheduling") or {}).get("provisioningModel")
    if modes == ["BULK"] and not has_topology and model not in BULK_MODELS:
        raise Refused(BULK_REFUSED)


@dataclass(frozen=True)
class Vm:
    name: str
    instance_id: int
    boot_disk: str  # a new one with every VM the group makes
    disks: tuple[str, ...]  # the other disks attached, by name


@dataclass
class ManagedGroup:
    name: str
    base_instance_name: str
    template: dict[str, Any]
    target_size: int
    repairs: bool
    kept_devices: frozenset[str]  # device names of its stateful disks with delete rule NEVER
    vms: dict[str, Vm] = field(default_factory=dict)
    lost_disks: list[str] = field(default_factory=list)  # disks deleted with a VM
    _ids: itertools.count = field(default_factory=lambda: itertools.count(7_100_000_001))

    @classmethod
    def declared(cls, group: dict[str, Any], template: dict[str, Any], has_topology: bool = False) -> "ManagedGroup":
        """From the group's and its template's inputs; refused as Compute Engine would refuse the group."""
        refuse_bulk_without_its_models(group, template, has_topology)
        action = (group.get("instanceLifecyclePolicy") or {}).get("defaultActionOnFailure", "REPAIR")
        kept = frozenset(
            d["deviceName"] for d in group.get("statefulDisks") or [] if str(d.get("deleteRule")).upper() == "NEVER"
        )
        made = cls(
            name=group["name"],
            base_instance_name=group["baseInstanceName"],
            template=template,
            target_size=int(group.get("targetSize") or 0),
            repairs=action == "REPAIR",
            kept_devices=kept,
        )
        made._fill()
        return made

    def _names(self) -> list[str]:
        prefix = self.base_instance_name.rstrip("#")
        digits = len(self.base_instance_name) - len(prefix)
        return [f"{prefix}{n:0{digits}d}" for n in range(1, self.target_size + 1)]

    def _fill(self) -> None:
        for name in self._names():
            if name not in self.vms:
                self.vms[name] = self._make(name)

    def _make(self, name: str) -> Vm:
        instance_id = next(self._ids)
        disks = tuple(d["source"] for d in self.template.get("disks") or [] if not d.get("boot") and d.get("source"))
        return Vm(name, instance_id, f"{name}-boot-{instance_id}", disks)

    def _end(self, name: str) -> None:
        """The VM is gone, its boot disk with it, and any disk the group does not keep and that auto-deletes."""
        self.vms.pop(name)
        for disk in self.template.get("disks") or []:
            if disk.get("boot") or not disk.get("source"):
                continue
            if disk.get("deviceName") not in self.kept_devices and disk.get("autoDelete", True):
                self.lost_disks.append(disk["source"])

    def preempt(self, name: str) -> None:
        """Google preempts the VM (or deletes it at its run cap, or a person deletes it): the group repairs it."""
        self._end(name)
        if self.repairs:
            self._fill()

    def resize(self, size: int) -> None:
        """`instanceGroupManagers.resize` (autostop's 0, a `pulumi up`'s declared size): VMs above it deleted by the
        group, missing ones below it made."""
        self.target_size = size
        for name in sorted(self.vms)[size:]:
            self._end(name)
        self._fill()

    def start(self, name: str) -> None:
        machine_type = str(self.template.get("machineType", ""))
        if machine_type.startswith(TPU_MACHINE_TYPES):
            raise Refused(START_REFUSED.format(machine_type=machine_type))
