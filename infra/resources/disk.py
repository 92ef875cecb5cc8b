"""The persistent data disk: where the fine-tuned model is kept, so that it outlives the VM."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from workload.core.contract import MOUNT_POINT

DEVICE_NAME = "tpu-sft-data"  # appears on the VM as /dev/disk/by-id/google-tpu-sft-data


@dataclass(frozen=True)
class DataDiskArgs:
    zone: str
    size_gb: int
    disk_type: str
    labels: dict[str, str]
    keep_on_destroy: bool
    # Asked for explicitly, never left to Google's defaults, which Hyperdisk Balanced bills above its included
    # baseline (infra/pricing/cost.py data_disk_performance); None where the type takes none (Hyperdisk ML takes no
    # IOPS).
    provisioned_iops: int | None = None
    provisioned_throughput: int | None = None  # MiB/s


class DataDisk(pulumi.ComponentResource):
    def __init__(self, name: str, args: DataDiskArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-sft:infra:DataDisk", name, None, opts)
        self.disk = gcp.compute.Disk(
            name,
            zone=args.zone,
            size=args.size_gb,
            type=args.disk_type,
            provisioned_iops=args.provisioned_iops,
            provisioned_throughput=args.provisioned_throughput,
            labels={**args.labels, "tpu-sft-role": "data"},
            # With keep on, `pulumi destroy` (or a replace) forgets the disk instead of deleting it.
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=args.keep_on_destroy),
        )
        self.name = self.disk.name
        self.self_link = self.disk.self_link
        self.register_outputs({"name": self.name})


def mount_script() -> str:
    """Startup script: format the data disk on first boot only, then mount it on every boot."""
    device = f"/dev/disk/by-id/google-{DEVICE_NAME}"
    return "\n".join(
        [
            "#!/bin/bash",
            "set -euo pipefail",
            f"blkid {device} >/dev/null || mkfs.ext4 -q -m 0 -E lazy_itable_init=0,discard {device}",
            f"mkdir -p {MOUNT_POINT}",
            f"mountpoint -q {MOUNT_POINT} || mount -o discard,defaults {device} {MOUNT_POINT}",
            f"chmod 1777 {MOUNT_POINT}",
            "",
        ]
    )
