"""What the Pulumi program declared for the VM and its data disk, read from the mock engine's recording: the plain VM,
or the group of one whose template carries it (tpu-sft:recovery auto: infra/resources/vm_group.py)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rehearsal.engine import Stack
from rehearsal.managed_group import ManagedGroup

INSTANCE = "gcp:compute/instance:Instance"
DISK = "gcp:compute/disk:Disk"
TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
GROUP = "gcp:compute/instanceGroupManager:InstanceGroupManager"


@dataclass(frozen=True)
class DeclaredVm:
    name: str  # the instance name, which GCE also makes the hostname
    ssh_keys: str  # the `ssh-keys` metadata: "user:ssh-ed25519 AAAA… comment" lines
    startup_script: str  # the `startup-script` metadata
    data_disk_device: str  # the attached disk's device name: /dev/disk/by-id/google-<it> on the VM
    data_disk_size_gb: int
    group: ManagedGroup | None = None  # the group that makes the VM, as Compute Engine would play it; None: plain

    @classmethod
    def of(cls, stack: Stack) -> "DeclaredVm":
        disk = stack.one(DISK).inputs
        if not stack.of_type(INSTANCE):
            return cls.in_group(stack.one(GROUP).inputs, stack.one(TEMPLATE).inputs, disk)
        vm = stack.one(INSTANCE).inputs
        (attached,) = vm["attachedDisks"]
        return cls(
            name=vm["name"],
            ssh_keys=vm["metadata"]["ssh-keys"],
            startup_script=vm["metadata"]["startup-script"],
            data_disk_device=attached["deviceName"],
            data_disk_size_gb=int(disk["size"]),
        )

    @classmethod
    def in_group(cls, group: dict[str, Any], template: dict[str, Any], disk: dict[str, Any]) -> "DeclaredVm":
        made = ManagedGroup.declared(group, template)
        (name,) = made.vms
        (attached,) = [d for d in template["disks"] if not d.get("boot")]
        return cls(
            name=name,
            ssh_keys=template["metadata"]["ssh-keys"],
            startup_script=template["metadata"]["startup-script"],
            data_disk_device=attached["deviceName"],
            data_disk_size_gb=int(disk["size"]),
            group=made,
        )
