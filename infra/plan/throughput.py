"""The training throughput a run's time and cost are estimated from, and where that figure comes from.

A preview cannot compile the step (minutes), so it reads a prediction of the step-time model
(workload/preflight/step_time.py; docs/preflight.md, "The step-time model"), first found of:
1. the preflight's record of exactly these train inputs (infra/preflight/compile_step.py `known_record`), where
scripts/preflight
   left one, with its `step_time`;
2. `PREDICTIONS`, the bench's table of known configurations on known accelerator types (bench/step_time.py writes it;
   bench/RESULTS.md, "Step time on paper");
3. none: then the seed's own v6e-8 figure stands in for the time, and the preview says how to get a prediction.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from infra.preflight.compile_step import known_record, record_path
from infra.pricing.cost import SEED_SECONDS_PER_STEP_PER_DEVICE_BATCH, seed_step_seconds
from workload.core.config import PipelineConfig
from workload.core.run_length import sequence_length

PREDICTIONS = Path(__file__).with_name("step_predictions.json")
# What a row of PREDICTIONS is matched on: the settings the bench compiled with that a stack sets. A row that names no
# tuning was compiled training every weight (bench/step_time.py's cases before LoRA): a LoRA run's step is another.
MATCHED = ("accelerator_type", "model", "trainer", "per_device_batch_size", "sequence_length", "tuning")
UNNAMED = {"tuning": "full"}


@dataclass(frozen=True)
class Throughput:
    """The step time a run's estimate uses, what else is predicted of the step (None where nothing predicts it:
    then the step time is the seed's), and what it was read from."""

    step_seconds: float
    tokens_per_second_per_chip: float | None
    mfu: float | None
    bound: str | None  # what bounds the step: compute, HBM or collectives
    source: str

    def output(self, pipeline: PipelineConfig) -> dict[str, Any]:
        """What the preview shows (the `throughput` output): the configuration and what is predicted of it."""
        return {
            "trainer": pipeline.trainer,
            "perDeviceBatchSize": pipeline.per_device_batch_size,
            "maxTargetLength": sequence_length(pipeline.max_target_length, pipeline.profile),
            "stepSeconds": _rounded(self.step_seconds, 4),
            "tokensPerSecondPerChip": _rounded(self.tokens_per_second_per_chip, 0),
            "mfu": _rounded(self.mfu, 3),
            "boundBy": self.bound,
            "source": self.source,
        }


def _rounded(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def predicted(pipeline: PipelineConfig) -> Throughput:
    """The prediction for `pipeline`'s train inputs: the preflight's record, the bench's table, or none."""
    record = known_record(pipeline)
    if record is not None and record.get("step_time"):
        return _from(record["step_time"], f"the preflight's record of these train inputs, {record_path(pipeline)}")
    trained = configuration(pipeline)
    for row in json.loads(PREDICTIONS.read_text())["predictions"]:
        if all(row["configuration"].get(key, UNNAMED.get(key)) == trained[key] for key in MATCHED):
            return _from(row["step_time"], f"the bench's table, {PREDICTIONS.name}: {row['source']}")
    seed = seed_step_seconds(pipeline.per_device_batch_size)
    return Throughput(
        step_seconds=seed,
        tokens_per_second_per_chip=None,
        mfu=None,
        bound=None,
        source=(
            f"no prediction for these train inputs: the seed's {seed:g} s a step stands in (its Tunix loop on a v6e-8, "
            f"{SEED_SECONDS_PER_STEP_PER_DEVICE_BATCH} s per sequence a chip); run scripts/preflight for one"
        ),
    )


def configuration(pipeline: PipelineConfig) -> dict[str, Any]:
    """What a row of PREDICTIONS is matched on, as `pipeline` trains it."""
    return {
        "accelerator_type": pipeline.accelerator_type,
        "model": pipeline.model,
        "trainer": pipeline.trainer,
        "per_device_batch_size": pipeline.per_device_batch_size,
        "sequence_length": sequence_length(pipeline.max_target_length, pipeline.profile),
        "tuning": pipeline.tuning,
    }


def _from(step_time: dict[str, Any], source: str) -> Throughput:
    return Throughput(
        step_seconds=step_time["step_s"],
        tokens_per_second_per_chip=step_time["tokens_per_s_per_chip"],
        mfu=step_time["mfu"],
        bound=step_time["bound"],
        source=source,
    )
