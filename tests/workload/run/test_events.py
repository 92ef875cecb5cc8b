"""Parsing MaxText output into events, and the bounded rate of the stream."""

import io
import json

from workload.launch.exit_reason import failure_cause
from workload.run.events import Events, StepProgress, parse_eval, parse_step
from workload.run.progress import render

# Captured from train_sft (MaxText 0.2.2, tiny profile): tqdm's bar and the step line share a line.
STEP_LINE = (
    "Training:  10%|█         | 2/20 [00:55<06:53, 22.97s/step, train_loss=12.5, train_perplexity=2.73e+5, "
    "train_steps_per_sec=0.224]I1130 10:22:03.899648 139867087899520 metric_logger.py:196] completed step: 2, "
    "seconds: 0.755, TFLOP/s/device: 0.017, Tokens/s/device: 169.486, total_weights: 70, loss: 12.510, "
    "lm_loss: 0.000, perplexity: 0.000\n"
)
# MaxText's MetricLogger after Tunix's held-out pass (metric_logger.py `_log_eval_metrics`; MaxText 0.2.3, tiny
# profile; 0.2.2 said "eval metrics after step: N, loss=…").
EVAL_LINE = (
    "I1206 19:07:28.426423 139624961031040 metric_logger.py:230] Completed eval after train step 2, loss=9.025, "
    "perplexity=8309.923, total_weights=121.0, avg_z_loss=0.000\n"
)
# MaxText 0.2.3's own loop logs each batch of a pass with its running mean: not a pass's loss (scripts/rehearse).
RUNNING_LINE = (
    "I1206 19:18:10.213964 139959672884096 metric_logger.py:249] Completed eval step: 1, seconds: 0.013, "
    "running loss=8.107, running perplexity=3317.306, running total_weights=121.0\n"
)
ORBAX_LINE = (
    "I1130 10:22:02.120993 139867087899520 base_pytree_checkpoint_handler.py:1452] [process=0][thread=MainThread]"
    " Pytree save finalize (merge_ocdbt + ArrayMetadata validation) completed. Time taken: 0.005065s.\n"
)
TRACEBACK_TAIL = [
    "Traceback (most recent call last):\n",
    '  File "/venv/lib/python3.12/site-packages/orbax/checkpoint/_src/serialization.py", line 5, in read\n',
    "    raise ValueError(msg)\n",
    "ValueError: Error reading array: DATA_LOSS: Checksum mismatch\n",
    "I1130 10:30:00.000000 1 resource_tracker.py:1] leaked semaphore objects to clean up\n",
]


def test_step_line_gives_step_loss_time_and_rate_not_lm_loss():
    assert parse_step(STEP_LINE) == {
        "step": 2,
        "step_seconds": 0.755,
        "tokens_per_s_per_device": 169.486,
        "tflops_per_device": 0.017,
        "loss": 12.51,
    }


def test_other_lines_are_not_steps():
    assert parse_step(ORBAX_LINE) is None
    assert parse_step("completed step: x\n") is None


def test_a_held_out_pass_gives_its_step_and_loss_and_is_no_training_step():
    assert parse_eval(EVAL_LINE) == {"step": 2, "eval_loss": 9.025}
    assert parse_step(EVAL_LINE) is None
    assert parse_eval(STEP_LINE) is None and parse_eval(ORBAX_LINE) is None
    assert parse_eval(RUNNING_LINE) is None and parse_step(RUNNING_LINE) is None
    assert parse_eval(EVAL_LINE.replace("9.025", "nan"))["eval_loss"] != parse_eval(EVAL_LINE)["eval_loss"]


def test_step_events_carry_the_last_held_out_loss_and_the_progress_line_shows_it():
    progress = StepProgress(total_steps=20)
    assert "eval_loss" not in progress.fields({"step": 1, "loss": 12.0})
    assert progress.held_out({"step": 10, "eval_loss": 11.862}) == {"step": 10, "eval_loss": 11.862}
    fields = progress.fields({"step": 11, "loss": 11.5})
    assert (fields["eval_loss"], fields["eval_step"]) == (11.862, 10)
    assert "held-out loss 11.8620 at step 10" in render({"event": "step", "phase": "train", **fields})
    assert render({"event": "eval", "phase": "train", "step": 10, "eval_loss": 11.862}) == (
        "train held-out loss at step 10: 11.8620"
    )
    assert progress.held_out({"step": 20, "eval_loss": float("nan")})["eval_loss"] is None  # JSON has no NaN


def test_a_step_whose_time_holds_a_held_out_pass_does_not_stretch_the_eta():
    progress = StepProgress(total_steps=10)
    progress.fields({"step": 1, "step_seconds": 60.0})  # compiles
    progress.fields({"step": 2, "step_seconds": 1.0})
    progress.held_out({"step": 3, "eval_loss": 2.0})  # MaxText logs step 3 after the pass, its time included
    assert progress.fields({"step": 3, "step_seconds": 18.0})["eta_s"] == 7.0
    assert progress.fields({"step": 4, "step_seconds": 1.0})["eta_s"] == 6.0


def test_nan_loss_is_parsed_and_reported_as_null():
    record = parse_step("completed step: 3, seconds: 1.0, loss: nan, lm_loss: 0.000\n")
    assert record["step"] == 3 and record["loss"] != record["loss"]
    fields = StepProgress(10).fields(record)
    assert fields["loss"] is None and json.loads(json.dumps(fields, allow_nan=False))["step"] == 3


def test_failure_cause_is_the_last_exception_line():
    assert failure_cause(TRACEBACK_TAIL, 1) == "ValueError: Error reading array: DATA_LOSS: Checksum mismatch"
    assert failure_cause(["jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED: oom\n"], 1).startswith(
        "jax.errors.JaxRuntimeError: RESOURCE_EXHAUSTED"
    )


def test_failure_cause_without_a_traceback_says_how_it_exited():
    assert failure_cause(["plain output\n"], -9) == "killed by signal 9 (SIGKILL: the kernel's OOM killer sends this)"
    assert failure_cause([], 3) == "exited with code 3 without an error message"


def test_eta_ignores_the_compiling_first_step_of_each_attempt():
    progress = StepProgress(100)
    assert "eta_s" not in progress.fields({"step": 1, "step_seconds": 120.0})
    assert progress.fields({"step": 2, "step_seconds": 1.0})["eta_s"] == 98.0
    assert progress.fields({"step": 3, "step_seconds": 3.0})["eta_s"] == 97 * 2.0
    resumed = StepProgress(100)  # a resumed attempt compiles again
    assert "eta_s" not in resumed.fields({"step": 51, "step_seconds": 300.0})


class FakeClock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_step_events_are_rate_limited_and_the_last_step_is_always_emitted():
    out, clock = io.StringIO(), FakeClock()
    events = Events(out, step_interval=5.0, clock=clock)
    for step in range(1, 101):
        clock.now = step * 0.5  # two steps a second for 50 s
        events.step("train", {"step": step, "steps": 100})
    events.flush_steps()
    steps = [json.loads(line)["step"] for line in out.getvalue().splitlines()]
    assert steps[0] == 1 and steps[-1] == 100
    assert len(steps) <= 50 / 5 + 2
    assert all(b - a >= 10 for a, b in zip(steps[:-2], steps[1:-1], strict=True))


def test_every_event_is_one_json_object_per_line_with_event_and_time():
    out = io.StringIO()
    Events(out).emit("phase", phase="convert", status="start")
    (line,) = out.getvalue().splitlines()
    record = json.loads(line)
    assert record["event"] == "phase" and isinstance(record["t"], float)


def test_a_long_run_emits_at_most_about_a_hundred_step_events():
    out, clock = io.StringIO(), FakeClock()
    events = Events(out, step_interval=5.0, clock=clock)
    for step in range(1, 20_001):
        clock.now = step * 10.0  # slow steps: the time bound alone would emit every one
        events.step("train", {"step": step, "steps": 20_000})
    events.flush_steps()
    steps = [json.loads(line)["step"] for line in out.getvalue().splitlines()]
    assert len(steps) <= 102 and steps[-1] == 20_000


def test_a_resume_says_from_which_checkpoint_where_and_that_the_data_restarts():
    line = render(
        {
            "event": "resume",
            "phase": "train",
            "from_step": 250,
            "checkpoints": "gs://b/runs/m/post-train/r/checkpoints",
            "data": "restarts from the first example (MaxText does not checkpoint the data iterator)",
        }
    )
    assert line == (
        "↻ train resumes from checkpoint 250 in gs://b/runs/m/post-train/r/checkpoints; data restarts from "
        "the first example (MaxText does not checkpoint the data iterator)"
    )
