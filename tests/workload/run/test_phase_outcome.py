"""Each phase's outcome in one line, from its summary: what stays on screen when `pulumi up` ends."""

from workload.eval.compare import compare
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


def reused(until, **facts):
    """A summary of a job that found the run's kept model (workload/run/pipeline.py `_emit_kept`)."""
    kept = {"kept_dir": "/mnt/tpu-sft-data/tpu-sft/run-a", "kept_at": "2026-12-06T16:57:03Z"}
    return {"ok": True, "until": until, "run_name": "run-a", "reused_kept_model": True, **kept, **facts}


def test_a_run_that_finished_before_is_one_line_not_three_phases_done_again():
    summaries = {
        "bootstrap": {"ok": True, "hosts": {"h": "installed"}},
        "convert": reused("convert"),
        "train": reused("train", eval_loss_first=1.9, eval_loss_final=1.5, learned=True),
        "export": reused("keep", verify={"ok": True}),
    }
    assert outcome_lines(summaries) == {
        "bootstrap": "✓ bootstrap: installed on 1 of 1 host(s)",
        "run": "run run-a finished before (model kept in /mnt/tpu-sft-data/tpu-sft/run-a, 2026-12-06T16:57:03Z): "
        "nothing to do",
    }
    # Each phase task's own last line says the same of its part.
    assert outcome_line("train", summaries["train"]) == (
        "✓ train: run run-a finished before (model kept in /mnt/tpu-sft-data/tpu-sft/run-a, 2026-12-06T16:57:03Z): "
        "nothing to do"
    )
    undated = outcome_lines(
        {"convert": reused("convert", kept_at=None), "train": reused("train"), "export": reused("keep", kept_at=None)}
    )
    assert undated == {
        "run": "run run-a finished before (model kept in /mnt/tpu-sft-data/tpu-sft/run-a): nothing to do"
    }


def test_phases_that_ran_keep_their_own_lines():
    done = {"convert": {"ok": True}, "train": {"ok": True}, "export": {"ok": True, "kept_dir": "/d"}}
    assert set(outcome_lines(done) or {}) == {"convert", "train", "export"}
    only_convert_found_it = {**done, "convert": reused("convert")}  # a convert job's match; train then trained
    assert set(outcome_lines(only_convert_found_it) or {}) == {"convert", "train", "export"}
    failed_after = {"convert": reused("convert"), "train": {"ok": False, "failed_step": "train", "error": "x"}}
    assert set(outcome_lines(failed_after) or {}) == {"convert", "train"}


def test_an_eval_that_found_the_fine_tune_worse_is_marked_not_ticked():
    def summary(gsm8k_tuned: list[float]) -> dict:
        ifeval = compare("ifeval", "prompt_level_strict_acc", [1.0, 0.0] * 50, [1.0, 0.0] * 50, margin_points=2.0)
        gsm8k = compare("gsm8k", "exact_match", [1.0] * 100, gsm8k_tuned, margin_points=2.0)
        return {"ok": True, "eval": {"tasks": [ifeval.to_json(), gsm8k.to_json()]}}

    fine, worse = summary([1.0] * 99 + [0.0]), summary([1.0] * 50 + [0.0] * 50)
    line = outcome_line("eval", fine) or ""
    assert line.startswith("✓ eval: IFEval strict 0.50 → 0.50 (+0.0 ± 0.0) · GSM8K 1.00 → 0.99 (−1.0 ± ")
    assert line.endswith(", within the margin)")
    assert (outcome_line("eval", worse) or "").startswith(
        "⚠ eval: IFEval strict 0.50 → 0.50 (+0.0 ± 0.0) · GSM8K 1.00 → 0.50 ("
    )
