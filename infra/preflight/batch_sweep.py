"""The largest per-device batch that fits: `scripts/preflight --sweep` compiles the stack's training step at the
stack's per-device batch, then doubles it while the verdict says it fits, the chip's margin and a resumed attempt
counted (workload/preflight/fit.py `Live.needed`; or halves it until it does), and names the largest that fits.
Each compile is an ordinary preflight
(infra/preflight/compile_step.py), remembered by its train inputs, so a sweep run again, or a preflight of one of its
batches, compiles nothing.

The answer is kept beside the compiles' records, named by the train inputs but the batch
(infra/preflight/compile_step.py `sweep_path`). This is the search for one configuration; `scripts/preflight --sweep`
runs it for each candidate configuration of levers (infra/preflight/candidates.py) and ranks what fits.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Callable

from workload.core.accelerators import CHIP_MARGINS
from workload.core.config import PipelineConfig

LARGEST_BATCH = 2**20  # where the doubling stops even if every batch left room
EXIT_NONE_FITS = 1

Compile = Callable[[PipelineConfig], tuple[int, dict[str, Any] | None]]


def headroom(record: dict[str, Any]) -> float:
    return 1 - record["hbm_bytes_per_chip"] / record["hbm_limit_bytes_per_chip"]


def sweep(pipeline: PipelineConfig, compile_one: Compile) -> tuple[int, list[dict[str, Any]]]:
    """(0 or the failed compile's exit status, one record per batch compiled, smallest batch first). HBM grows with
    the batch, so the first batch on the other side of the verdict ends the search."""
    records: list[dict[str, Any]] = []
    batch, going_up = pipeline.per_device_batch_size, None
    while 1 <= batch <= LARGEST_BATCH:
        status, record = compile_one(replace(pipeline, per_device_batch_size=batch))
        if record is None:
            return status, records
        records.append(record)
        if going_up is None:
            going_up = bool(record["fits"])
        elif record["fits"] != going_up:
            break
        batch = batch * 2 if going_up else batch // 2
    return 0, sorted(records, key=lambda r: r["settings"]["per_device_batch_size"])


def largest(records: list[dict[str, Any]]) -> int | None:
    batches = [r["settings"]["per_device_batch_size"] for r in records if r["fits"]]
    return max(batches, default=None)


def answer(pipeline: PipelineConfig, records: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "accelerator": pipeline.accelerator_type,
        "model": pipeline.model,
        "chip_margin": CHIP_MARGINS[pipeline.trainer],
        "largest_per_device_batch_size": largest(records),
        "compile_seconds": round(sum(r["compile_seconds"] for r in records), 1),
        "batches": [_row(r) for r in records],
    }


def _row(record: dict[str, Any]) -> dict[str, Any]:
    row = {
        "per_device_batch_size": record["settings"]["per_device_batch_size"],
        "fits": record["fits"],
        "hbm_bytes_per_chip": record["hbm_bytes_per_chip"],
        "headroom": round(headroom(record), 3),
        "compile_seconds": record["compile_seconds"],
    }
    return row | ({"bounds": record["bounds"]} if record["fits"] else {})


def table(result: dict[str, Any]) -> str:
    """Markdown, for a person and for README: one row per batch compiled."""
    lines = [
        f"| per-device batch | HBM per chip ({result['accelerator']}) | headroom | step ≥ | tokens/s ≤ | run ≥ | $ ≥ |",
        "|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in result["batches"]:
        gib = f"{row['hbm_bytes_per_chip'] / 2**30:.2f} GiB"
        if not row["fits"]:
            lines.append(f"| {row['per_device_batch_size']} | ≥ {gib}: does not fit | | | | | |")
            continue
        b = row["bounds"]
        usd = "" if b["usd_at_least"] is None else f"{b['usd_at_least']:.2f}"
        lines.append(
            f"| {row['per_device_batch_size']} | {gib} | {row['headroom']:.0%} | {b['step_seconds_at_least']:.3f} s "
            f"| {b['tokens_per_second_at_most']:,.0f} | {b['run_hours_at_least']:.2f} h | {usd} |"
        )
    best = result["largest_per_device_batch_size"]
    lines.append("")
    lines.append(
        f"Largest that fits with the chip's margin (× {result['chip_margin']}): tpu-sft:perDeviceBatchSize {best}"
        if best is not None
        else f"No batch fits with the chip's margin (× {result['chip_margin']}) on a {result['accelerator']}: "
        "pulumi config set tpu-sft:acceleratorType with more chips, or a shorter tpu-sft:maxTargetLength"
    )
    return "\n".join(lines)
