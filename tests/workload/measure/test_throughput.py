"""TFLOP/s, MFU, tokens/s and goodput from MaxText's own output, and how a progress line shows them."""

from pathlib import Path

import pytest

from workload.measure.throughput import AttemptTimeline, peak_tflops_per_device, train_figures
from workload.run.events import StepProgress, parse_step
from workload.run.progress import render

# Captured from train_sft (MaxText 0.2.2, tiny profile, CPU): what the timeline reads, in log order.
MAXTEXT_LINES = [
    "I1130 20:49:16.127862 139991025519488 max_utils.py:804] System Information: Jax Version: 0.9.2\n",
    "I1130 20:49:16.127965 139991025519488 max_utils.py:806] System Information: Jax Backend: cpu\n",
    "tpu-sft devices: 1 x cpu (cpu)\n",  # the trainer's launcher's (workload/measure/devices.py)
    "I1130 20:49:16.131558 139991025519488 maxtext_utils.py:1655] Num_devices: 1, shape (1, 1, 1, 1, 1, 1)\n",
    "I1130 20:49:24.041876 139991025519488 event_tracking.py:138] [process=0] [sync] Finished load in 0.39 seconds"
    " @ /w/gemma3-4b/mt-format/0/items\n",
    "I1130 20:49:29.534595 139991025519488 metric_logger.py:303] number parameters: 0.017 billion\n",
    "I1130 20:51:03.934089 139991025519488 event_tracking.py:138] [process=0] [sync] Finished save in 0.90 seconds"
    " @ /w/checkpoints/1\n",
    "I1130 20:51:04.010000 139991025519488 metric_logger.py:196] completed step: 1, seconds: 95.818, "
    "TFLOP/s/device: 0.000, Tokens/s/device: 1.336, total_weights: 70, loss: 12.522, lm_loss: 0.000\n",
    "I1130 20:51:19.164945 139991025519488 event_tracking.py:138] [process=0] [sync] Finished save in 0.48 seconds"
    " @ /w/checkpoints/10\n",
]
# What the lent TPU v5e chip printed (bench/tpu/runs/2026-12-05-1/logs/tunix-b1.log), only the lines read here.
CHIP_LINES = (Path(__file__).parent / "fixtures" / "tpu_v5e_train_sft.log").read_text().splitlines(keepends=True)[2:]


def test_the_timeline_reads_backend_devices_marks_and_checkpoint_saves():
    timeline = AttemptTimeline(started=100.0)
    for second, line in enumerate(MAXTEXT_LINES):
        timeline.observe(line, now=110.0 + second)
    assert timeline.device_kind == "cpu"
    assert timeline.facts == {
        "backend": "cpu",
        "device_kind": "cpu",
        "devices": 1,
        "imported_s": 10.0,
        "training_started_s": 15.0,
        "first_step_s": 17.0,
        # the save before step 1's line is inside step 1's time, the one after the last step inside none; the
        # checkpoint *load* is not a save
        "saves_in_steps": [[1, 0.9]],
        "trailing_checkpoint_s": 0.48,
        "saves": 2,
    }


def test_an_async_save_counts_only_its_blocking_part():
    timeline = AttemptTimeline(started=0.0)
    timeline.observe("completed step: 1, seconds: 3.0\n", now=1.0)
    timeline.observe("[process=0] [async] Finished blocking save in 1.25 seconds. Continuing save @ /c/10.\n", now=2.0)
    timeline.observe("[process=0] [async] Finished save (blocking + background) in 9.00 seconds @ /c/10\n", now=3.0)
    timeline.observe("completed step: 2, seconds: 4.3\n", now=4.0)
    assert timeline.facts["saves_in_steps"] == [[2, 1.25]] and timeline.facts["saves"] == 1


def test_the_peak_is_that_of_the_chip_that_ran_and_unknown_elsewhere():
    assert peak_tflops_per_device("TPU v6 lite") == (918.0, None)
    assert peak_tflops_per_device("TPU v5 lite") == (197.0, None)
    # a TPU VM whose JAX fell back to the CPU must not be measured against the TPU's peak
    assert peak_tflops_per_device("cpu") == (None, "no peak FLOP/s known for cpu")
    assert peak_tflops_per_device(None) == (None, "no peak FLOP/s known for devices the trainer did not name")


def test_on_the_chip_the_mfu_is_against_the_v5e_peak_though_maxtext_names_no_generation():
    """MaxText's backend line on a TPU reads "PJRT C API"; the launcher's own line names the chip."""
    timeline = AttemptTimeline(started=0.0)
    for second, line in enumerate(CHIP_LINES):
        timeline.observe(line, now=float(second))
    assert (timeline.facts["backend"], timeline.device_kind, timeline.facts["devices"]) == ("tpu", "TPU v5 lite", 1)
    assert timeline.facts["hbm_peak_bytes_per_chip"] == 12636644352
    metrics = [{**record, "attempt": 1.0} for line in CHIP_LINES if (record := parse_step(line)) is not None]
    attempt = {"attempt": 1.0, "seconds": 100.0, **timeline.facts}
    figures = train_figures([{"attempt": 1.0}, attempt], metrics, wall_s=100.0)
    # steps 2-10 (step 1 compiles): median 87.231 TFLOP/s/device of the v5e's 197
    assert figures["device_kind"] == "TPU v5 lite" and figures["peak_tflops_per_device"] == 197.0
    assert figures["mfu"] == pytest.approx(87.231 / 197.0, abs=1e-4) and "mfu_reason" not in figures
    progress = StepProgress(10, peak_tflops_per_device=197.0).fields(metrics[-1])
    assert progress["mfu"] == pytest.approx(89.905 / 197.0, abs=1e-4)


def test_step_events_carry_tflops_and_mfu_only_with_a_peak():
    record = parse_step("completed step: 7, seconds: 2.0, TFLOP/s/device: 413.1, Tokens/s/device: 8192.0, loss: 1.5\n")
    assert "mfu" not in StepProgress(1000).fields(record)
    fields = StepProgress(1000, peak_tflops_per_device=918.0).fields(record)
    assert fields["tflops_per_device"] == 413.1 and fields["mfu"] == 0.45


def test_a_progress_line_shows_tflops_and_mfu():
    line = render(
        {
            "event": "step",
            "phase": "train",
            "step": 120,
            "steps": 1000,
            "loss": 1.2345,
            "step_seconds": 0.61,
            "tokens_per_s_per_device": 6714.8,
            "tflops_per_device": 413.1,
            "mfu": 0.45,
            "eta_s": 542,
        }
    )
    assert line == (
        "train step 120/1000 · loss 1.2345 · 0.61 s/step · 6715 tokens/s/device · 413 TFLOP/s/device · "
        "MFU 45.0% · ETA 9 min 2 s"
    )
    cpu = render({"event": "step", "phase": "train", "step": 2, "steps": 30, "tflops_per_device": 0.0162})
    assert cpu == "train step 2/30 · 0.0162 TFLOP/s/device"


def _step(step, attempt, seconds, tflops, tokens):
    return {
        "step": step,
        "attempt": attempt,
        "step_seconds": seconds,
        "tflops_per_device": tflops,
        "tokens_per_s_per_device": tokens,
    }


def test_train_figures_use_the_steady_steps_and_count_kept_steps_once():
    # Attempt 1 trained steps 1-6 and was killed; the checkpoint was at 4, so attempt 2 re-trained 5-6.
    metrics = [_step(1, 1.0, 60.0, 0.1, 10.0)] + [_step(s, 1.0, 1.0, 400.0, 8000.0) for s in range(2, 7)]
    metrics += [_step(5, 2.0, 50.0, 0.1, 10.0), _step(6, 2.0, 2.0, 200.0, 4000.0), _step(7, 2.0, 2.0, 200.0, 4000.0)]
    attempts = [
        {"attempt": 1.0},
        {"attempt": 2.0},
        {
            "attempt": 2.0,
            "seconds": 100.0,
            "backend": "tpu",
            "device_kind": "TPU v6 lite",
            "devices": 8,
            "imported_s": 20.0,
            "training_started_s": 30.0,
            "first_step_s": 80.0,
            "saves_in_steps": [[7, 1.0]],
            "trailing_checkpoint_s": 0.0,
            "saves": 1,
        },
    ]
    figures = train_figures(attempts, metrics, wall_s=200.0)
    # steady, kept: 2, 3, 4 (attempt 1: 1 s each) and 6, 7 (attempt 2: 2 s each); medians
    assert figures["tflops_per_device"] == 400.0 and figures["tokens_per_s_per_device"] == 8000.0
    assert figures["mfu"] == pytest.approx(400.0 / 918.0, abs=1e-4) and "mfu_reason" not in figures
    assert (figures["backend"], figures["devices"], figures["tokens_per_s"]) == ("tpu", 8, 64000.0)
    # steps: 3 × 1 s + 2 × 2 s, less the 1 s save; first steps: 60 + 50 s
    assert figures["time_split_s"] == {
        "imports": 20.0,
        "setup": 10.0,
        "first_steps": 110.0,
        "checkpoints": 1.0,
        "eval": 0.0,
        "steps": 6.0,
        "other": 53.0,
    }
    assert figures["goodput"] == 0.03


def test_on_a_cpu_mfu_is_null_with_the_reason_and_the_rates_are_still_real():
    metrics = [_step(1, 1.0, 90.0, 0.0, 1.3), _step(2, 1.0, 0.5, 0.026, 256.0), _step(3, 1.0, 0.6, 0.021, 208.0)]
    attempts = [
        {"attempt": 1.0},
        {"attempt": 1.0, "seconds": 120.0, "backend": "cpu", "device_kind": "cpu", "devices": 1},
    ]
    figures = train_figures(attempts, metrics, wall_s=120.0)
    assert figures["mfu"] is None and figures["mfu_reason"] == "no peak FLOP/s known for cpu"
    assert figures["tflops_per_device"] == 0.024 and figures["tokens_per_s"] == 232.0
    assert figures["goodput"] == pytest.approx(1.1 / 120.0, abs=1e-4)


def test_the_tiny_run_reports_real_rates_and_no_made_up_mfu(tiny_pipeline):
    run = tiny_pipeline.finished
    summary = run.summary
    assert (summary["backend"], summary["devices"]) == ("cpu", 1)
    assert summary["mfu"] is None and summary["mfu_reason"] == "no peak FLOP/s known for cpu"
    assert summary["tflops_per_device"] > 0 and summary["tokens_per_s"] == summary["tokens_per_s_per_device"] > 0
    # MaxText counts ~6 FLOPs per parameter per token for training: its two rates agree with the model's size,
    # within the 3 decimals MaxText prints TFLOP/s/device with (0.003 on a busy 2-core machine)
    expected = summary["tokens_per_s_per_device"] * 6 * summary["verify"]["parameters"] / 1e12
    assert abs(summary["tflops_per_device"] - expected) <= 0.0006 + 0.1 * expected
    assert 0 < summary["goodput"] < 1
    split = summary["time_split_s"]
    assert sum(split.values()) == pytest.approx(summary["train_wall_s"], abs=1.0)
    assert all(v >= 0 for v in split.values()) and split["first_steps"] > 0 and split["checkpoints"] > 0
    steps = [e for e in run.events if e["event"] == "step" and e["step"] > 1]
    assert steps and all(e["tflops_per_device"] >= 0 and "mfu" not in e for e in steps)


def test_held_out_passes_are_their_own_share_of_the_time_and_leave_the_step_rates_alone():
    timeline = AttemptTimeline(started=0.0)
    for now, line in [
        (10.0, "System Information: Jax Version: 0.9.2\n"),
        (20.0, "peft_trainer.py:802] Running evaluation on train step 0.\n"),
        (26.0, "metric_logger.py:230] Completed eval after train step 0, loss=12.014, perplexity=1.6e5\n"),
        (30.0, "metric_logger.py:303] number parameters: 0.017 billion\n"),
        (40.0, "completed step: 1, seconds: 10.0, loss: 12.5\n"),
        (41.5, "peft_trainer.py:802] Running evaluation on train step 2.\n"),
        (45.5, "metric_logger.py:230] Completed eval after train step 2, loss=11.900, perplexity=1.4e5\n"),
        (46.0, "completed step: 2, seconds: 5.0, loss: 12.4\n"),  # MaxText's own step time holds the pass
        (47.0, "completed step: 3, seconds: 1.0, loss: 12.3\n"),
    ]:
        timeline.observe(line, now)
    assert timeline.facts["eval_passes"] == [[0, 6.0, False], [2, 4.0, True]]
    attempt = {"attempt": 1.0, "seconds": 50.0, "backend": "cpu", "device_kind": "cpu", "devices": 1, **timeline.facts}
    metrics = [
        {"step": 1, "attempt": 1.0, "step_seconds": 10.0, "tokens_per_s_per_device": 1.0},
        {"step": 0, "attempt": 1.0, "eval_loss": 12.014},
        {"step": 2, "attempt": 1.0, "eval_loss": 11.9},
        {"step": 2, "attempt": 1.0, "step_seconds": 5.0, "tokens_per_s_per_device": 20.0},
        {"step": 3, "attempt": 1.0, "step_seconds": 1.0, "tokens_per_s_per_device": 100.0},
    ]
    figures = train_figures([{"attempt": 1.0}, attempt], metrics, wall_s=50.0)
    split = figures["time_split_s"]
    # setup: 10 → 30 s less the 6 s pass before training; steps: 5 + 1 s less the 4 s pass inside step 2's time
    assert (split["eval"], split["setup"], split["steps"]) == (10.0, 14.0, 2.0)
    assert split["imports"] + split["setup"] + split["first_steps"] + split["eval"] + split["steps"] <= 50.0
    assert figures["tokens_per_s_per_device"] == 60.0  # the median of steps 2 and 3; no pass is a step


def test_a_save_inside_no_kept_step_is_not_taken_from_the_kept_steps_time():
    """The tiny pipeline's resume under load: attempt 1 saved at step 10 after logging step 9 and was killed, so
    that save is inside no step's time; attempt 2 resumed at 11. Only its own saves, inside its steps 20 and 30,
    come out of the steps' time (taking attempt 1's too once left nothing: goodput 0)."""
    metrics = [_step(s, 1.0, 5.0 if s > 1 else 240.0, 0.002, 24.0) for s in range(1, 10)]
    metrics += [_step(s, 2.0, 2.0, 0.006, 60.0) for s in range(11, 31)]
    metrics[-11] = _step(20, 2.0, 36.0, 0.0, 3.5)  # 32.6 s of it the save at 20
    metrics[-1] = _step(30, 2.0, 65.0, 0.0, 2.0)  # 47.5 s of it the save at 30
    attempts = [
        {"attempt": 1.0},
        {"attempt": 1.0, "seconds": 700.0, "saves_in_steps": [[1, 113.4]], "trailing_checkpoint_s": 137.2, "saves": 2},
        {"attempt": 2.0},
        {
            "attempt": 2.0,
            "seconds": 300.0,
            "backend": "cpu",
            "device_kind": "cpu",
            "devices": 1,
            "saves_in_steps": [[20, 32.6], [30, 47.5]],
            "trailing_checkpoint_s": 0.0,
            "saves": 2,
        },
    ]
    figures = train_figures(attempts, metrics, wall_s=1000.0)
    split = figures["time_split_s"]
    # steady: 8 × 5 s (attempt 1: 2-9) + 17 × 2 s, 36 s and 65 s (attempt 2: 12-30), less its two saves
    assert split["steps"] == pytest.approx(8 * 5.0 + 17 * 2.0 + 36.0 + 65.0 - 32.6 - 47.5, abs=0.1)
    assert split["first_steps"] == pytest.approx(240.0 + 2.0 - 113.4, abs=0.1)  # step 11 is attempt 2's first
    assert split["checkpoints"] == pytest.approx(113.4 + 137.2 + 32.6 + 47.5, abs=0.1)
    assert figures["goodput"] == pytest.approx(split["steps"] / 1000.0, abs=1e-4) and figures["goodput"] > 0
