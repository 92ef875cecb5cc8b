"""What a stack costs, before anything is spent: documented price tables, a run-time estimate, and what Google bills
each part for.

Prices: a v6e chip-hour per provisioning model (`V6E_CHIP_HOUR`, each with its source and date, or why it is
missing); disks' and Cloud Storage's per GB-month, and the data disk's provisioned performance (below). They change,
differ by region and ignore committed-use discounts: override with `tpu-sft:pricePerChipHour`,
`diskPricePerGbMonth`, `storagePricePerGbMonth`. Every estimate names the price it used (`chip_price`).

What the TPU is billed for depends on how it was provisioned. A reservation is billed for its whole period whether
VMs use it or not, and a VM that consumes it adds nothing ("reservation-bound VMs incur no additional charge for the
reserved capacity", Google's reservation pages as issue 39 quotes them): with RESERVATION_BOUND, or STANDARD on a
reservation, autostop saves no TPU money, and the run's cost is its share of the reservation. Without one (STANDARD,
SPOT, FLEX_START) the TPU is billed for the VM's uptime. Disks bill by size for as long as they exist, the VM
running or not; checkpoints by size for as long as the bucket keeps them (`checkpointRetentionDays`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workload.core.models import MODELS


@dataclass(frozen=True)
class ListedPrice:
    """Google's price of one v6e chip-hour under one provisioning model, or None where Google's figure was not found,
    and where it comes from (or where it was looked for)."""

    usd_per_chip_hour: float | None
    source: str


# Looked for on 2026-12-05 in the stored copies of Google's pages (search: "Cloud TPU pricing v6e", "TPU v6e spot
# flex-start pricing"): the stored cloud.google.com/tpu/pricing lists v2, v3 and v4 only, so no v6e figure was re-read.
# Google's own words on the others, without a figure: Spot VMs are "heavily discounted" (Compute API reference,
# Scheduling.ProvisioningModel); flex-start and calendar-mode reservations "benefit from DWS discounts"
# (cloud.google.com/compute/docs/instances/about-flex-start-vms). So a missing figure is never made up: the estimate
# uses the on-demand price in its place, an upper bound by those words, and says so (`chip_price`).
# A chip-hour is one price on every v6e machine (ct6e-standard-1t, -4t, -8t): searched again on 2026-12-07 ("Cloud TPU
# pricing v6e Trillium per chip-hour", "v6e pricing per chip-hour v6e-1 v6e-4 v6e-8"), the stored pricing pages are
# still of v2 to v4, whose "v4 pricing is based on the number of chips in the topology"; no stored page gives a v6e
# machine a price of its own. So a machine's hour is its chips × this table's price (infra/plan/machines.py).
ON_DEMAND = "STANDARD"
V6E_CHIP_HOUR: dict[str, ListedPrice] = {
    ON_DEMAND: ListedPrice(
        2.70,
        "on-demand list price, us-east5, cloud.google.com/tpu/pricing as published in 2024 (DESIGN.md); not re-read "
        "on 2026-12-05: the stored page predates v6e",
    ),
    "SPOT": ListedPrice(None, "Google's v6e Spot price not found (searched 2026-12-05)"),
    "FLEX_START": ListedPrice(None, "Google's v6e flex-start (DWS) price not found (searched 2026-12-05)"),
    # The reservation is billed for its whole period, used or not (tpu_billed_for): this is the run's share of it.
    "RESERVATION_BOUND": ListedPrice(
        None, "Google's v6e calendar-mode reservation price not found (searched 2026-12-05)"
    ),
}


@dataclass(frozen=True)
class ChipPrice:
    """The price an estimate uses: for which provisioning model, how much, and on what basis (one line)."""

    provisioning_model: str
    usd_per_chip_hour: float
    basis: str

    def output(self) -> dict[str, Any]:
        """What the preview shows (the `tpuPrice` output)."""
        return {
            "provisioningModel": self.provisioning_model,
            "usdPerChipHour": self.usd_per_chip_hour,
            "basis": self.basis,
        }


def chip_price(provisioning_model: str, override: float | None) -> ChipPrice:
    """The stack's own price (tpu-sft:pricePerChipHour), or the table's for its provisioning model, or, where Google's
    figure was not found, the on-demand one as an upper bound, saying so."""
    if override is not None:
        return ChipPrice(provisioning_model, override, "tpu-sft:pricePerChipHour, set in the stack")
    listed = V6E_CHIP_HOUR[provisioning_model]
    if listed.usd_per_chip_hour is not None:
        return ChipPrice(provisioning_model, listed.usd_per_chip_hour, listed.source)
    on_demand = V6E_CHIP_HOUR[ON_DEMAND]
    return ChipPrice(
        provisioning_model,
        on_demand.usd_per_chip_hour or 0.0,
        f"{listed.source}: the on-demand price stands in, an upper bound; set yours with tpu-sft:pricePerChipHour",
    )


# USD per GB-month of capacity, the list prices of Google's pricing pages (cloud.google.com/compute/disks-image-pricing,
# cloud.google.com/storage/pricing: Standard storage in one region) as last read for us-central1 in 2025, not re-read
# here (no pricing page is stored on this machine). Set yours with diskPricePerGbMonth and storagePricePerGbMonth.
DISK_USD_PER_GB_MONTH = {"hyperdisk-balanced": 0.08, "hyperdisk-ml": 0.08}

# Hyperdisk Balanced bills performance too: "Hyperdisk Balanced volumes include, at no extra charge, up to 3,000 IOPS
# and 140 MiB/s of throughput. You're billed for provisioned throughput that exceeds 140 MiB/s and provisioned IOPS that
# exceeds 3,000 IOPS." (cloud.google.com/compute/docs/disks/hd-types/hyperdisk-balanced, "Baseline performance", read
# through the search tool on 2026-12-05). A volume created without them gets Google's defaults, which that page leaves
# to another ("Default IOPS and throughput values", not found here): so the data disk asks for exactly the included
# baseline (infra/resources/disk.py), and its performance costs nothing above capacity. Google's price of IOPS and
# throughput above the baseline was not found (searched 2026-12-05), and none is provisioned.
# What the run needs of the data disk: it holds the kept model only (the HF cache and the converted checkpoint are on
# /dev/shm, checkpoints in the bucket: docs/checkpoints.md), written once by export and read back by verify, in large
# sequential files. At 140 MiB/s gemma3-4b's 7.76 GB (bfloat16) take 53 s each way against a run of ~40 minutes; a
# few hundred large files need nowhere near 3,000 IOPS. So the baseline is what the run needs.
INCLUDED_PERFORMANCE = {"hyperdisk-balanced": (3_000, 140)}  # (IOPS, MiB/s) included in the capacity price
KEPT_MODEL_BYTES_PER_PARAMETER = 2  # the export's weight_dtype=bfloat16 (workload/run/commands.py export)
MIB = 1024 * 1024


@dataclass(frozen=True)
class DiskPerformance:
    """What a data disk is provisioned with, and what that costs a month beyond its capacity (None: not known)."""

    iops: int | None
    mib_per_s: int | None
    usd_per_month: float | None
    basis: str

    def output(self, model: str) -> dict[str, Any]:
        seconds = None if self.mib_per_s is None else kept_model_seconds(model, self.mib_per_s)
        return {
            "provisionedIops": self.iops,
            "provisionedThroughputMiBps": self.mib_per_s,
            "performanceUsdPerMonth": self.usd_per_month,
            "keptModelWriteSeconds": seconds,
            "basis": self.basis,
        }


def data_disk_performance(disk_type: str) -> DiskPerformance:
    """Hyperdisk Balanced: its included baseline, asked for explicitly. Hyperdisk ML: Google's default throughput
    (it takes no IOPS), whose value and price were not found (searched 2026-12-05)."""
    included = INCLUDED_PERFORMANCE.get(disk_type)
    if included is None:
        return DiskPerformance(
            None, None, None, f"{disk_type}: Google's default throughput, its price not found (searched 2026-12-05)"
        )
    iops, mib_per_s = included
    return DiskPerformance(iops, mib_per_s, 0.0, f"{disk_type}: the {iops:,} IOPS and {mib_per_s} MiB/s included")


def kept_model_seconds(model: str, mib_per_s: int) -> float:
    """Seconds to write (or read back) the kept model at `mib_per_s`."""
    return round(MODELS[model].parameters * KEPT_MODEL_BYTES_PER_PARAMETER / (mib_per_s * MIB), 1)


# Standard storage in one region: $0.020 per GB-month in Columbus (us-east5, where the default zone's bucket is) and in
# us-central1, us-east1 and us-south1; $0.023 in us-east4, us-west2 … (cloud.google.com/storage/pricing, "Data storage",
# read through the search tool on 2026-12-06 in stored copies of that page: the web archive's of 2022-12-30 and a later
# undated one agree). Another region's price differs: set yours with storagePricePerGbMonth.
STORAGE_USD_PER_GB_MONTH = 0.020
DAYS_PER_MONTH = 365 / 12

RESERVATION = "the reservation's whole period, used or not: autostop saves no TPU money"
UPTIME = "uptime: from each start until the VM is deleted"

# A checkpoint holds the parameters and Adam's mu and nu, float32 each (docs/checkpoints.md: the gradient
# accumulator's zeros compress away), an upper bound: orbax compresses a little.
CHECKPOINT_BYTES_PER_PARAMETER = 3 * 4

# Wall-time model of one run on v6e-8. Bootstrap, conversion and export: the seed tutorial's own figures (conversion
# ~5 min) and minutes each as measured. Training: steps × the step time the preview reads (infra/plan/throughput.py: the
# step-time model's prediction for the run's configuration). The seed's own figure, 1,000 SFT steps of one sequence a
# chip in ~10 min with its Tunix loop, stands in where nothing predicts the step, and sizes the run cap
# (infra/pricing/run_cap.py): it is slower than every prediction (bench/RESULTS.md, "Step time on paper"), so a cap from
# it does not cut a run short, and it does not move with a prediction found on one machine and not another (a new cap
# replaces the VM).
BOOTSTRAP_HOURS = 0.25
CONVERT_HOURS = 5 / 60
SEED_SECONDS_PER_STEP_PER_DEVICE_BATCH = 0.6
EXPORT_HOURS = 10 / 60


@dataclass(frozen=True)
class CostEstimate:
    chips: int
    usd_per_chip_hour: float
    run_hours: float
    train_hours: float
    eval_hours: float = 0.0  # the eval phase's estimate (infra/pricing/eval_cost.py), part of run_hours

    @property
    def hourly_usd(self) -> float:
        return round(self.chips * self.usd_per_chip_hour, 2)

    @property
    def run_usd(self) -> float:
        return round(self.hourly_usd * self.run_hours, 2)


def estimate(
    chips: int, usd_per_chip_hour: float, steps: int, step_seconds: float, eval_hours: float = 0.0
) -> CostEstimate:
    """A whole run: its fixed phases, `steps` training steps of `step_seconds` each, and the eval's estimate
    (infra/pricing/eval_cost.py `eval_hours`: 0 where the eval is off)."""
    train_hours = steps * step_seconds / 3600
    hours = BOOTSTRAP_HOURS + CONVERT_HOURS + train_hours + EXPORT_HOURS + eval_hours
    return CostEstimate(
        chips=chips,
        usd_per_chip_hour=usd_per_chip_hour,
        run_hours=round(hours, 3),
        train_hours=round(train_hours, 3),
        eval_hours=eval_hours,
    )


def seed_step_seconds(per_device_batch_size: int) -> float:
    """The seed's measured step on a v6e-8, scaled by the sequences each chip takes a step."""
    return SEED_SECONDS_PER_STEP_PER_DEVICE_BATCH * per_device_batch_size


def checkpoints_per_run(steps: int, checkpoint_period: int | None, trainer: str = "native") -> int:
    """Where each loop saves (docs/trainer.md, "a checkpoint"): MaxText's own loop at every index that is a multiple of
    the period, its first index 0 among them, and the final state; Tunix after updates period, 2 × period, … and the
    last. Unset: the final one only (MaxText's default period, 10,000, is past any run's end here)."""
    if not checkpoint_period:
        return 1
    if trainer == "native":  # indices 0, period, 2 × period, … below `steps`, and the final index, steps - 1
        last = steps - 1
        return last // checkpoint_period + 1 + (1 if last % checkpoint_period else 0)
    return -(-steps // checkpoint_period)


def tpu_billed_for(provisioning_model: str, reservation: str | None) -> str:
    if provisioning_model == "RESERVATION_BOUND" or (provisioning_model == "STANDARD" and reservation):
        return RESERVATION
    return UPTIME


def disk_cost(disks: list[dict[str, Any]], usd_per_gb_month: float | None) -> dict[str, Any]:
    """`disks`: name, count, gb, type each, and a disk's provisioned `performance` (DiskPerformance.output) where it
    has one. Capacity at the price given, or the table's for each disk's type, plus what its performance costs."""

    def monthly(d: dict[str, Any]) -> float:
        capacity = d["count"] * d["gb"] * (usd_per_gb_month or DISK_USD_PER_GB_MONTH[d["type"]])
        return round(capacity + ((d.get("performance") or {}).get("performanceUsdPerMonth") or 0.0), 2)

    priced = [{**d, "usdPerMonth": monthly(d)} for d in disks]
    return {"disks": priced, "usdPerMonth": round(sum(d["usdPerMonth"] for d in priced), 2)}


def checkpoint_cost(
    model: str,
    steps: int,
    checkpoint_period: int | None,
    days_kept: int,
    usd_per_gb_month: float,
    trainer: str = "native",
) -> dict[str, Any]:
    """What one run's checkpoints cost in the bucket until its lifecycle rule deletes them."""
    count = checkpoints_per_run(steps, checkpoint_period, trainer)
    gb = count * MODELS[model].parameters * CHECKPOINT_BYTES_PER_PARAMETER / 1e9
    return {
        "checkpoints": count,
        "gb": round(gb, 1),
        "daysKept": days_kept,
        "usd": round(gb * usd_per_gb_month * days_kept / DAYS_PER_MONTH, 2),
    }


def kept_model_cost(model: str, usd_per_gb_month: float) -> dict[str, Any]:
    """What the kept model costs a month in the bucket (a slice's only copy, a VM's copy of its data disk's: the
    export's weights; its metrics and loss curve are small beside them), from keep until `pulumi destroy` deletes the
    bucket, or for as long as a kept bucket stays (tpu-sft:keepCheckpointBucket, keepDataDisk)."""
    gb = MODELS[model].parameters * KEPT_MODEL_BYTES_PER_PARAMETER / 1e9
    return {"gb": round(gb, 1), "usdPerMonth": round(gb * usd_per_gb_month, 2), "until": "pulumi destroy"}
