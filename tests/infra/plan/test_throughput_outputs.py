"""What `pulumi up` reports about how well the chips were used: MFU and tokens/s, read from the train
phase's summary."""

import json

from infra.config.read_settings import parse
from infra.preflight import compile_step
from rehearsal.engine import run_program


def _outputs(dev_config, monkeypatch, train_summary):
    monkeypatch.setenv(
        "HF_TOKEN", "hf_" + "Tok3n" * 8
    )  # an update needs one (tests/infra/config/test_settings_errors.py)
    stdout = {"train": "train step 1000/1000 · loss 1.2300\n" + json.dumps(train_summary) + "\n"}
    return run_program(dev_config, preview=False, command_stdout=stdout).outputs


def test_mfu_and_tokens_per_second_come_from_the_train_summary(dev_config, monkeypatch):
    summary = {
        "event": "summary",
        "ok": True,
        "final_step": 1000,
        "tflops_per_device": 412.3,
        "mfu": 0.4491,
        "tokens_per_s_per_device": 6120.5,
        "devices": 8,
        "tokens_per_s": 48964.0,
    }
    outputs = _outputs(dev_config, monkeypatch, summary)
    assert outputs["mfu"] == 0.4491
    assert outputs["tokensPerSecond"] == 48964.0


def test_mfu_is_null_where_the_summary_has_no_peak(dev_config, monkeypatch):
    summary = {
        "event": "summary",
        "ok": True,
        "mfu": None,
        "mfu_reason": "no peak FLOP/s known for cpu",
        "tokens_per_s": 226.0,
    }
    outputs = _outputs(dev_config, monkeypatch, summary)
    assert outputs.get("mfu") is None  # Pulumi leaves a null output out of the stack's outputs
    assert outputs["tokensPerSecond"] == 226.0


def test_the_chips_measured_hbm_peak_is_shown_beside_the_preflights_figure(dev_config, monkeypatch, tmp_path):
    """The train summary's figures are what a TPU's memory_stats() would give (the tiny run shows the real path on
    a CPU, which reports none: tests/workload/measure/test_hbm_peak.py); the preflight's record is this machine's
    file."""
    monkeypatch.setattr(compile_step, "CACHE", tmp_path / "preflight")
    path = compile_step.record_path(parse(dev_config, stack="dev").pipeline)
    path.parent.mkdir(parents=True)
    record = {"fits": True, "accelerator": "v6e-8", "hbm_bytes_per_chip": 16_000_000_000}
    path.write_text(json.dumps(record | {"hbm_limit_bytes_per_chip": 33_554_432_000}))
    summary = {"event": "summary", "ok": True, "hbm_peak_bytes_per_chip": 17_600_000_000}
    summary["hbm_bytes_limit_per_chip"] = 33_822_867_456
    outputs = _outputs(dev_config, monkeypatch, summary)
    assert outputs["hbmPerChip"] == {
        "measuredPeakBytes": 17_600_000_000,
        "limitBytes": 33_822_867_456,
        "preflightBytes": 16_000_000_000,
        "measuredOverPreflight": 1.1,
        "reason": None,
    }


def test_without_a_measurement_or_a_preflight_the_output_says_why(dev_config, monkeypatch, tmp_path):
    monkeypatch.setattr(compile_step, "CACHE", tmp_path / "preflight")
    summary = {"event": "summary", "ok": True, "hbm_peak_bytes_per_chip": None}
    summary["hbm_reason"] = "cpu devices report no memory statistics"
    hbm = _outputs(dev_config, monkeypatch, summary)["hbmPerChip"]
    assert hbm["measuredPeakBytes"] is None and hbm["preflightBytes"] is None
    assert hbm["reason"] == "cpu devices report no memory statistics"
