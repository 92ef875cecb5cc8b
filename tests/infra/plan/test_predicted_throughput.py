"""The preview's training time and cost come from the configuration's predicted throughput (infra/plan/throughput.py):
the preflight's record of the same train inputs, else the bench's table of predictions, else the seed's figure,
each named as the source."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from infra.config.read_settings import parse
from infra.plan import throughput
from infra.plan.reruns import render
from infra.preflight import compile_step
from infra.pricing.cost import BOOTSTRAP_HOURS, CONVERT_HOURS, EXPORT_HOURS
from tests.infra.estimates import eval_hours

FIXED_HOURS = BOOTSTRAP_HOURS + CONVERT_HOURS + EXPORT_HOURS


# A table as bench/step_time.py writes it: the dev stack's configuration, and another batch.
ROW = {
    "configuration": {
        "accelerator_type": "v6e-8",
        "model": "gemma3-4b",
        "trainer": "native",
        "per_device_batch_size": 4,
        "sequence_length": 2048,
        "weight_dtype": "float32",
        "remat_policy": None,
    },
    "step_time": {"step_s": 0.125, "tokens_per_s_per_chip": 16384.0, "mfu": 0.4321, "bound": "compute"},
    "source": "bench/step_time.py case v6e-8-native-b4-f32, compiled 2026-12-05 at abc1234",
}


@pytest.fixture(autouse=True)
def predictions(tmp_path, monkeypatch):
    """This machine's own preflight records are not the test's; the table is the test's own."""
    monkeypatch.setattr(compile_step, "CACHE", tmp_path / "preflight")
    other = {**ROW, "configuration": {**ROW["configuration"], "per_device_batch_size": 1}}
    table = tmp_path / "step_predictions.json"
    table.write_text(json.dumps({"predictions": [other, ROW]}))
    monkeypatch.setattr(throughput, "PREDICTIONS", table)


def test_the_dev_stacks_preview_shows_the_tables_prediction_and_times_the_run_by_it(mock_stack):
    row = ROW
    out = mock_stack().outputs
    shown = out["throughput"]
    assert shown["source"] == f"the bench's table, step_predictions.json: {ROW['source']}"
    assert (shown["trainer"], shown["perDeviceBatchSize"], shown["maxTargetLength"]) == ("native", 4, 2048)
    step = row["step_time"]
    assert shown["stepSeconds"] == pytest.approx(step["step_s"], abs=1e-4)
    assert shown["tokensPerSecondPerChip"] == pytest.approx(step["tokens_per_s_per_chip"], abs=1)
    assert shown["mfu"] == pytest.approx(step["mfu"], abs=1e-3) and shown["boundBy"] == step["bound"]
    assert shown["trainingHours"] == pytest.approx(250 * step["step_s"] / 3600, abs=1e-3)  # the seed's tokens
    assert out["estimatedRunHours"] == pytest.approx(FIXED_HOURS + shown["trainingHours"] + eval_hours(out), abs=2e-3)
    assert out["estimatedRunCostUsd"] == pytest.approx(out["hourlyCostUsd"] * out["estimatedRunHours"], abs=0.01)


def test_the_preflights_record_of_the_same_train_inputs_comes_first(mock_stack, dev_config):
    path = compile_step.record_path(parse(dev_config, stack="dev").pipeline)
    path.parent.mkdir(parents=True)
    step = {"step_s": 0.5, "tokens_per_s_per_chip": 4096.0, "mfu": 0.321, "bound": "HBM"}
    record = {"fits": True, "accelerator": "v6e-8", "hbm_bytes_per_chip": 16_000_000_000, "step_time": step}
    path.write_text(json.dumps(record | {"hbm_limit_bytes_per_chip": 33_554_432_000}))
    out = mock_stack().outputs
    shown = out["throughput"]
    assert shown["source"] == f"the preflight's record of these train inputs, {path}"
    assert (shown["stepSeconds"], shown["tokensPerSecondPerChip"], shown["mfu"], shown["boundBy"]) == (
        0.5,
        4096.0,
        0.321,
        "HBM",
    )
    assert out["estimatedRunHours"] == pytest.approx(FIXED_HOURS + 250 * 0.5 / 3600 + eval_hours(out), abs=2e-3)


def test_without_a_prediction_the_seeds_figure_stands_in_and_the_preview_says_how_to_get_one(mock_stack, dev_config):
    unknown = {"tpu-sft:perDeviceBatchSize": "3", "tpu-sft:maxTargetLength": "1024"}
    steps = parse({**dev_config, **unknown}, stack="dev").pipeline.steps  # the seed's tokens at this batch
    out = mock_stack(unknown).outputs
    shown = out["throughput"]
    assert shown["source"].startswith("no prediction for these train inputs: the seed's 1.8 s a step stands in")
    assert shown["source"].endswith("run scripts/preflight for one")
    assert shown["tokensPerSecondPerChip"] is None and shown["mfu"] is None and shown["stepSeconds"] == 1.8
    assert out["estimatedRunHours"] == pytest.approx(FIXED_HOURS + steps * 1.8 / 3600 + eval_hours(out), abs=2e-3)


def test_the_committed_table_is_what_the_bench_writes():
    rows = json.loads(Path(throughput.__file__).with_name("step_predictions.json").read_text())["predictions"]
    assert isinstance(rows, list)
    for row in rows:
        assert set(row) == {"configuration", "step_time", "source"}
        assert set(throughput.MATCHED) - set(throughput.UNNAMED) <= set(row["configuration"])
        assert row["step_time"]["step_s"] > 0 and row["source"].startswith("bench/step_time.py case ")


def test_the_printed_plan_shows_the_loop_the_configuration_and_its_prediction(dev_config):
    settings = parse(dev_config, stack="dev")
    step = ROW["step_time"]
    text = render(settings, settings)
    [line] = [line for line in text.splitlines() if line.startswith("Throughput: ")]
    assert line.startswith("Throughput: native loop, 4 × 2,048 tokens a chip on v6e-8: ")
    assert f"{step['tokens_per_s_per_chip']:,.0f} tokens/s per chip, {step['mfu']:.0%} MFU" in line
    assert f"training {round(250 * step['step_s'] / 3600, 3):.2f} h (predicted: the bench's table" in line
