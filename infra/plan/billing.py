"""What Google bills a stack for, as stack outputs: the TPU's basis (a reservation's period or the VM's uptime), the
disks by size and type, one run's checkpoints in the bucket by size and days kept, and the kept model in the bucket by
size and month (infra/pricing/cost.py has the prices and where they come from; docs/costs.md, a table per provisioning
model)."""

from __future__ import annotations

from typing import Any

from infra.config.settings import Settings
from infra.pricing.cost import checkpoint_cost, data_disk_performance, disk_cost, kept_model_cost, tpu_billed_for
from infra.resources.vm import BOOT_DISK_TYPE


def disks(s: Settings) -> list[dict[str, Any]]:
    """Every host's boot disk; the single VM's data disk (a slice has none)."""
    boot = {"disk": "boot", "count": s.accelerator.hosts, "gb": s.boot_disk_size_gb, "type": BOOT_DISK_TYPE}
    if s.is_slice:
        return [boot]
    performance = data_disk_performance(s.data_disk_type).output(s.pipeline.model)
    return [
        boot,
        {"disk": "data", "count": 1, "gb": s.data_disk_size_gb, "type": s.data_disk_type, "performance": performance},
    ]


def outputs(s: Settings) -> dict[str, Any]:
    pipeline = s.pipeline
    return {
        "tpuBilledFor": tpu_billed_for(s.provisioning_model, s.reservation),
        "diskCost": disk_cost(disks(s), s.disk_price_per_gb_month),
        "checkpointCost": checkpoint_cost(
            pipeline.model,
            pipeline.steps,
            pipeline.checkpoint_period,
            s.checkpoint_retention_days,
            s.storage_price_per_gb_month,
            pipeline.trainer,
        ),
        "keptModelCost": kept_model_cost(pipeline.model, s.storage_price_per_gb_month),
    }
