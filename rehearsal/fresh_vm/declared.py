"""What the Pulumi program declared for the VM and its data disk, read from the mock engine's recording."""

from __future__ import annotations

from dataclasses import dataclass

from rehearsal.engine import Stack

INSTANCE = "gcp:compute/instance:Instance"
DISK = "gcp:compute/disk:Disk"


@dataclass(frozen=True)
class DeclaredVm:
    name: str  # the instance name, which GCE also makes the hostname
    ssh_keys: str  # the `ssh-keys` metadata: "user:ssh-ed25519 AAAA… comment" lines
    startup_script: str  # the `startup-script` metadata
    data_disk_device: str  # the attached disk's device name: /dev/disk/by-id/google-<it> on the VM
    data_disk_size_gb: int

    @classmethod
    def of(cls, stack: Stack) -> "DeclaredVm":
        vm = stack.one(INSTANCE).inputs
        disk = stack.one(DISK).inputs
        (attached,) = vm["attachedDisks"]
        return cls(
            name=vm["name"],
            ssh_keys=vm["metadata"]["ssh-keys"],
            startup_script=vm["metadata"]["startup-script"],
            data_disk_device=attached["deviceName"],
            data_disk_size_gb=int(disk["size"]),
        )
