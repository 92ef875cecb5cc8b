"""Each phase's outcome in one line, from its summary: what stays on screen when `pulumi up` ends."""

from workload.run.phase_outcome import outcome_line, outcome_lines

BILL = {"vm_up_s": 4932, "chips": 8, "chip_hours": 10.96, "usd_per_chip_hour": 2.7, "cost_usd": 29.59}


def test_train_says_whether_it_learned_and_how_fast():
    train = {"ok": True, "eval_loss_first": 1.91, "eval_loss_final": 1.52, "learned": True}
    line = outcome_line("train", {**train, "tokens_per_s": 41234.6, "mfu": 0.4123})
    assert line == "✓ train: held-out loss 1.910 → 1.520 (it learned) · 41,235 tokens/s · MFU 41.2%"
    off_tpu = outcome_line("train", {**train, "learned": False, "mfu": None, "mfu_reason": "not a TPU"})
    assert off_tpu == "✓ train: held-out loss 1.910 → 1.520 (it did NOT learn) · no MFU (not a TPU)"


def test_export_says_where_the_model_is_and_the_bill():
    export = {"ok": True, "kept_dir": "/mnt/tpu-sft-data/tpu-sft/run", "verify": {"ok": True}, "bill": BILL}
    assert outcome_line("export", export) == (
        "✓ export: model at /mnt/tpu-sft-data/tpu-sft/run · verified · bill 10.96 chip-hours ≈ $29.59"
    )


def test_a_failure_says_where_and_why():
    failed = {"ok": False, "failed_step": "train", "error": "exit code 1: RESOURCE_EXHAUSTED"}
    assert outcome_line("train", failed) == "✗ train failed at train: exit code 1: RESOURCE_EXHAUSTED"


def test_bootstrap_and_convert():
    assert (
        outcome_line("bootstrap", {"ok": True, "hosts": {"h": "installed"}})
        == "✓ bootstrap: installed on 1 of 1 host(s)"
    )
    assert outcome_line("convert", {"ok": True, "checkpoint": "/dev/shm/c/0/items"}) == (
        "✓ convert: checkpoint /dev/shm/c/0/items"
    )


def test_a_phase_not_run_yet_has_no_line():
    assert outcome_line("train", {}) is None
    assert outcome_lines({"train": {}, "export": {}}) is None  # a preview: no `phases` output at all
