"""The data disk's performance is what the run needs and what the estimate prices: asked for explicitly, at the
baseline Hyperdisk Balanced includes, and shown in the preview (the disk's inputs and the diskCost output).

Google's rule, "About Hyperdisk Balanced" (cloud.google.com/compute/docs/disks/hd-types/hyperdisk-balanced,
"Baseline performance", read through the search tool on 2026-12-05): "Hyperdisk Balanced volumes include, at no extra
charge, up to 3,000 IOPS and 140 MiB/s of throughput. You're billed for provisioned throughput that exceeds 140 MiB/s
and provisioned IOPS that exceeds 3,000 IOPS." A volume created without them gets Google's defaults ("If you don't
provision performance, Compute Engine creates the volume with default values", the same page), whose values were not
found here: the stand-in below therefore cannot bill such a disk, and neither could an estimate.
"""

from __future__ import annotations

import pytest

from infra.pricing.cost import MIB
from workload.core.models import MODELS

DISK = "gcp:compute/disk:Disk"
INCLUDED_IOPS, INCLUDED_MIBPS = 3_000, 140  # Google's words above, spelled out: not read from the code under test


class UnknownBill(Exception):
    """The stand-in cannot say what Google bills: the disk left its performance to Google's defaults."""


def billed_performance_above_capacity(inputs: dict) -> tuple[int, int]:
    """What a Hyperdisk Balanced volume bills beyond its capacity, as Google's rule says: (IOPS, MiB/s) above the
    included baseline."""
    if inputs["type"] != "hyperdisk-balanced":
        raise ValueError(inputs["type"])
    if "provisionedIops" not in inputs or "provisionedThroughput" not in inputs:
        raise UnknownBill("provisioned performance left to Google's defaults")
    return (
        max(0, int(inputs["provisionedIops"]) - INCLUDED_IOPS),
        max(0, int(inputs["provisionedThroughput"]) - INCLUDED_MIBPS),
    )


def test_the_stand_in_refuses_to_guess_a_disk_left_to_googles_defaults():
    with pytest.raises(UnknownBill):
        billed_performance_above_capacity({"type": "hyperdisk-balanced", "size": 100})
    assert billed_performance_above_capacity(
        {"type": "hyperdisk-balanced", "provisionedIops": 4000, "provisionedThroughput": 200}
    ) == (1000, 60)


def test_the_data_disk_asks_for_the_included_baseline_and_bills_nothing_for_it(mock_stack):
    stack = mock_stack()
    disk = stack.one(DISK).inputs
    assert (disk["provisionedIops"], disk["provisionedThroughput"]) == (INCLUDED_IOPS, INCLUDED_MIBPS)
    assert billed_performance_above_capacity(disk) == (0, 0)
    # The preview's estimate is that bill: the data disk's performance, its price and its capacity price alone.
    [data] = [d for d in stack.outputs["diskCost"]["disks"] if d["disk"] == "data"]
    assert data["performance"]["provisionedIops"] == INCLUDED_IOPS
    assert data["performance"]["provisionedThroughputMiBps"] == INCLUDED_MIBPS
    assert data["performance"]["performanceUsdPerMonth"] == 0
    assert data["usdPerMonth"] == pytest.approx(data["gb"] * 0.08)


def test_the_baseline_is_what_the_run_needs():
    """The kept model (bfloat16) is the data disk's only large I/O: written once, read back once. At the included
    140 MiB/s gemma3-4b's takes under a minute each way, a small share of a ~40-minute run (infra/pricing/cost.py says
    why nothing else touches the disk)."""
    seconds = MODELS["gemma3-4b"].parameters * 2 / (INCLUDED_MIBPS * MIB)
    assert seconds < 60


def test_hyperdisk_ml_takes_no_iops_and_its_price_is_said_to_be_unknown(mock_stack):
    stack = mock_stack({"tpu-sft:dataDiskType": "hyperdisk-ml"})
    disk = stack.one(DISK).inputs
    assert (
        "provisionedIops" not in disk
    )  # Hyperdisk ML provisions throughput only (Google's Hyperdisk performance page)
    [data] = [d for d in stack.outputs["diskCost"]["disks"] if d["disk"] == "data"]
    assert data["performance"]["performanceUsdPerMonth"] is None
    assert "not found" in data["performance"]["basis"]
