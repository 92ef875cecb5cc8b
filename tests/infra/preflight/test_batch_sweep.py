"""The batch sweep's search and its answer, on a stand-in for the compiler whose HBM grows with the batch (the real
compiler's sweep: tests/workload/preflight/test_preflight.py)."""

from __future__ import annotations

import pytest

from infra.preflight import batch_sweep
from infra.preflight.compile_step import sweep_path
from workload.core.config import PipelineConfig

GIB = 2**30
LIMIT = 32 * GIB


class LinearCompiler:
    """HBM per chip = fixed + per_sequence x batch, as the weights, optimizer state and activations make it, and the
    chip's margin with them (the preflight's record holds what the verdict needs: workload/preflight/fit.py)."""

    def __init__(self, fixed_gib: float, per_sequence_gib: float, fails_at: int | None = None):
        self.fixed, self.per_sequence, self.fails_at = fixed_gib * GIB, per_sequence_gib * GIB, fails_at
        self.compiled: list[int] = []

    def __call__(self, pipeline: PipelineConfig):
        batch = pipeline.per_device_batch_size
        self.compiled.append(batch)
        if batch == self.fails_at:
            return 76, None
        used = int(self.fixed + self.per_sequence * batch)
        record = {
            "fits": used <= LIMIT,
            "hbm_bytes_per_chip": used,
            "hbm_limit_bytes_per_chip": LIMIT,
            "compile_seconds": 10.0,
            "settings": {"per_device_batch_size": batch},
        }
        if record["fits"]:
            record["bounds"] = {
                "step_seconds_at_least": 0.05 * batch,
                "tokens_per_second_at_most": 40_000.0,
                "run_hours_at_least": 0.014 * batch,
                "usd_at_least": 2.4 * batch,
            }
        return 0, record


def test_doubles_from_the_stacks_batch_until_the_headroom_is_gone():
    compiler = LinearCompiler(fixed_gib=6, per_sequence_gib=1.8)  # 8: 20.4 GiB; 16: 34.8 GiB, does not fit
    status, records = batch_sweep.sweep(PipelineConfig(per_device_batch_size=1), compiler)
    assert status == 0 and compiler.compiled == [1, 2, 4, 8, 16]
    assert batch_sweep.largest(records) == 8


def test_halves_a_stack_batch_that_does_not_fit_until_one_leaves_room():
    compiler = LinearCompiler(fixed_gib=6, per_sequence_gib=1.8)
    status, records = batch_sweep.sweep(PipelineConfig(per_device_batch_size=64), compiler)
    assert compiler.compiled == [64, 32, 16, 8]
    assert [r["settings"]["per_device_batch_size"] for r in records] == [8, 16, 32, 64]
    assert batch_sweep.largest(records) == 8


def test_when_no_batch_leaves_room_there_is_no_answer_and_the_table_says_what_to_change():
    compiler = LinearCompiler(fixed_gib=40, per_sequence_gib=1)
    status, records = batch_sweep.sweep(PipelineConfig(per_device_batch_size=2), compiler)
    assert compiler.compiled == [2, 1]
    result = batch_sweep.answer(PipelineConfig(), records)
    assert result["largest_per_device_batch_size"] is None
    last = batch_sweep.table(result).splitlines()[-1]
    assert last.startswith("No batch fits with the chip's margin (× 1.05) on a v6e-8: ")  # MaxText's own loop's


def test_a_failed_compile_ends_the_sweep_with_its_status():
    compiler = LinearCompiler(fixed_gib=6, per_sequence_gib=1.8, fails_at=4)
    status, records = batch_sweep.sweep(PipelineConfig(per_device_batch_size=1), compiler)
    assert status == 76 and len(records) == 2


def test_the_answer_and_its_table():
    compiler = LinearCompiler(fixed_gib=6, per_sequence_gib=1.8)
    _, records = batch_sweep.sweep(PipelineConfig(per_device_batch_size=4), compiler)
    result = batch_sweep.answer(PipelineConfig(per_device_batch_size=4), records)
    assert result["largest_per_device_batch_size"] == 8 and result["compile_seconds"] == 30.0
    assert [row["per_device_batch_size"] for row in result["batches"]] == [4, 8, 16]
    lines = batch_sweep.table(result).splitlines()
    assert lines[2] == "| 4 | 13.20 GiB | 59% | 0.200 s | 40,000 | 0.06 h | 9.60 |"
    assert lines[4] == "| 16 | ≥ 34.80 GiB: does not fit | | | | | |"
    assert lines[-1] == "Largest that fits with the chip's margin (× 1.05): tpu-sft:perDeviceBatchSize 8"
    tunix = batch_sweep.answer(PipelineConfig(trainer="tunix"), records)  # each loop's margin (accelerators.py)
    assert batch_sweep.table(tunix).splitlines()[-1].startswith("Largest that fits with the chip's margin (× 1.15)")


@pytest.mark.parametrize(("field", "value"), [("per_device_batch_size", 8), ("step_count", 1000)])
def test_the_answer_is_named_by_the_train_inputs_but_the_batch(field, value):
    base = sweep_path(PipelineConfig(per_device_batch_size=1, step_count=20))
    other = sweep_path(PipelineConfig(**{"per_device_batch_size": 1, "step_count": 20, field: value}))
    assert (base == other) == (field == "per_device_batch_size")
