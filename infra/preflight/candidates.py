"""The configurations a sweep ranks (`scripts/preflight --sweep`, and `tpu-sft:perDeviceBatchSize auto`): each a few
levers (workload/core/config.py), compiled for the stack's accelerator at every batch the batch search tries
(infra/preflight/batch_sweep.py); the ones that fit are ranked by the tokens/s per chip the preflight predicts for them
(workload/preflight/step_time.py), and the first is the configuration the stack trains with, the second shown beside
it as the runner-up.

A candidate sets only what the stack leaves unset: a lever the stack sets, and its loop (tpu-sft:trainer), are the
stack's, and a candidate that says otherwise, or that the settings' rules refuse with them (vocabulary tiling in
Tunix's loop), is not compiled.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from workload.core.config import BY_KEY, ConfigError, PipelineConfig

# The levers a candidate may set: the step's, and the loop, which must agree with the stack's.
LEVER_KEYS = ("trainer", "rematPolicy", "attention", "flashBlockSize", "vocabTiling", "xlaFlags")
# Data: which configurations the chip's sweep ranked best (bench/RESULTS.md, "Issue 54's sweep on the v5e chip",
# 4 of gemma3-4b's layers). Replace the rows, not the code. The stack's own levers; MaxText's own loop with remat
# minimal, rank 1 there (the same step as full at 4 layers, one remat block; at 34 layers it keeps what full
# recomputes: less time, more memory); and with the loss's vocabulary in 4 tiles, 18 % slower at the same batch for
# 2.5 GB less of temporaries: a larger batch where memory binds. Flash blocks of 2048 are out: they overflowed the v5e
# core's vector memory at compile.
CANDIDATES: tuple[dict[str, Any], ...] = (
    {},
    {"trainer": "native", "rematPolicy": "minimal"},
    {"trainer": "native", "vocabTiling": 4},
)


def levers(pipeline: PipelineConfig) -> dict[str, Any]:
    """The configuration's levers, stack-keyed, unset ones left out."""
    values = {key: getattr(pipeline, BY_KEY[key].field) for key in LEVER_KEYS}
    return {key: value for key, value in values.items() if value is not None}


def applied(pipeline: PipelineConfig, candidate: dict[str, Any]) -> PipelineConfig | None:
    """The stack's settings with the candidate's levers where the stack leaves them unset; None where the candidate
    contradicts the stack or its rules."""
    mine = levers(pipeline)
    if any(key in mine and mine[key] != value for key, value in candidate.items()):
        return None
    unset = {key: value for key, value in candidate.items() if key not in mine}
    try:
        merged = PipelineConfig.from_mapping({**pipeline.to_mapping(), **unset})
    except ConfigError:
        return None
    return replace(pipeline, **{BY_KEY[key].field: getattr(merged, BY_KEY[key].field) for key in unset})


def configurations(pipeline: PipelineConfig) -> list[PipelineConfig]:
    """The candidates this stack can train with, each once, in the table's order."""
    found: list[PipelineConfig] = []
    for candidate in CANDIDATES:
        configuration = applied(pipeline, candidate)
        if configuration is not None and configuration not in found:
            found.append(configuration)
    return found


def ranked(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The records that fit, the fastest first by predicted tokens/s per chip, each as a row the answer keeps."""
    fitting = [r for r in records if r["fits"]]
    fitting.sort(key=lambda r: r["step_time"]["tokens_per_s_per_chip"], reverse=True)
    return [_row(r) for r in fitting]


def _row(record: dict[str, Any]) -> dict[str, Any]:
    prediction = record["step_time"]
    return {
        "levers": record["levers"],
        "per_device_batch_size": record["settings"]["per_device_batch_size"],
        "tokens_per_s_per_chip": prediction["tokens_per_s_per_chip"],
        "mfu": prediction["mfu"],
        "step_s": prediction["step_s"],
        "bound": prediction["bound"],
        "hbm_bytes_per_chip": record["hbm_bytes_per_chip"],
    }


def settings_of(row: dict[str, Any]) -> dict[str, Any]:
    """The stack settings that train with a ranked row: its levers and its batch."""
    return {**row["levers"], "perDeviceBatchSize": row["per_device_batch_size"]}


def describe(row: dict[str, Any]) -> str:
    """One configuration in words, as the sweep and the preview show it."""
    set_levers = ", ".join(f"{key} {value}" for key, value in row["levers"].items())
    return (
        f"{set_levers or 'MaxText defaults'}, perDeviceBatchSize {row['per_device_batch_size']}: "
        f"{row['tokens_per_s_per_chip']:,.0f} tokens/s per chip, {row['mfu']:.1%} MFU predicted "
        f"({row['step_s'] * 1000:.0f} ms a step, {row['bound']}-bound)"
    )
