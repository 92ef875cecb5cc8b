"""What `pulumi up` reports about how well the chips were used: MFU and tokens/s, read from the train
phase's summary."""

import json

from rehearsal.engine import run_program


def _outputs(dev_config, monkeypatch, train_summary):
    monkeypatch.setenv("HF_TOKEN", "hf_" + "Tok3n" * 8)  # an update needs one (tests/infra/test_settings_errors.py)
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
