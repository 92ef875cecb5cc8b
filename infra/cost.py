"""What a stack costs, before anything is spent: a documented price table and a run-time estimate.

Prices: Cloud TPU on-demand list price per chip-hour, as published for us-east5 in 2024 (source:
cloud.google.com/tpu/pricing). They change, differ by region and ignore committed-use discounts and
reservations' own billing: override with `tpu-sft:pricePerChipHour`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PRICE_TABLE: dict[str, dict[str, Any]] = {"v6e": {"usd_per_chip_hour": 2.70, "region": "us-east5", "as_of": "2024"}}

# Wall-time model of one run on v6e-8, from the seed tutorial's own figures: conversion ~5 min, 1,000 SFT
# steps ~10 min; bootstrap and export measured as minutes each. Training scales with steps × batch.
BOOTSTRAP_HOURS = 0.25
CONVERT_HOURS = 5 / 60
SECONDS_PER_STEP_PER_DEVICE_BATCH = 0.6
EXPORT_HOURS = 10 / 60


@dataclass(frozen=True)
class CostEstimate:
    chips: int
    usd_per_chip_hour: float
    run_hours: float

    @property
    def hourly_usd(self) -> float:
        return round(self.chips * self.usd_per_chip_hour, 2)

    @property
    def run_usd(self) -> float:
        return round(self.hourly_usd * self.run_hours, 2)


def estimate(chips: int, usd_per_chip_hour: float, steps: int, per_device_batch_size: int) -> CostEstimate:
    train_hours = steps * per_device_batch_size * SECONDS_PER_STEP_PER_DEVICE_BATCH / 3600
    hours = BOOTSTRAP_HOURS + CONVERT_HOURS + train_hours + EXPORT_HOURS
    return CostEstimate(chips=chips, usd_per_chip_hour=usd_per_chip_hour, run_hours=round(hours, 3))
