"""The boot-resume budget (workload/run/resume_budget.py): at most K boot-resumes without a newer checkpoint, none
past the deadline, both kept beside the run's checkpoints; every resume and refusal in the run's log and in the line
`tpu-sft status` prints."""

from __future__ import annotations

import json
import os

from tests.workload.run.test_pipeline import fake_steps, make_context  # noqa: F401  (fake_steps: a fixture)
from workload.core.config import PipelineConfig
from workload.core.trainer_loop import TRAINER_LOOPS
from workload.run import pipeline, resume_budget, run_state
from workload.run.layout import Layout
from workload.run.resume_budget import BootResume, decide

HOUR = 3600.0
RESUME = BootResume("run-1", limit=3, deadline_hours=4)


def test_k_resumes_at_one_checkpoint_then_a_refusal_that_says_why():
    record, now = None, 1000.0
    for n in range(1, 4):
        decision = decide(record, 10, now, RESUME)
        assert decision.refusal is None and decision.since_checkpoint == n
        record = decision.record
    refused = decide(record, 10, now, RESUME)
    assert refused.refusal is not None and refused.record == record
    assert refused.refusal.startswith("3 boot-resumes at checkpoint 10 without a newer checkpoint")
    assert "tpu-sft:bootResumes (3)" in refused.refusal


def test_a_newer_checkpoint_between_resumes_starts_the_count_again():
    record = None
    for checkpoint in (None, 10, 20, 30):
        decision = decide(record, checkpoint, 1000.0, RESUME)
        assert decision.refusal is None and decision.since_checkpoint == 1
        record = decision.record
    assert decide(record, 30, 1000.0, BootResume("run-5", limit=1, deadline_hours=4)).refusal is not None


def test_the_deadline_is_set_by_the_first_resume_and_refuses_every_later_one_past_it():
    first = decide(None, None, 1000.0, RESUME)
    assert first.record["deadline"] == 1000.0 + 4 * HOUR
    later = decide(first.record, 50, 1000.0 + 4 * HOUR - 1, RESUME)
    assert later.refusal is None and later.record["deadline"] == first.record["deadline"]
    past = decide(later.record, 60, 1000.0 + 4 * HOUR, RESUME)
    assert past.refusal is not None and "past the boot-resume deadline" in past.refusal


def _context(tmp_path):
    config = PipelineConfig.from_mapping({"runName": "budget"})
    ctx, out = make_context(tmp_path, config)
    ctx.layout = Layout(ctx.layout.work_dir, ctx.layout.output_dir, config.model, "budget", str(tmp_path / "runs"))
    return ctx, out


def test_a_crash_loop_runs_k_times_then_ends_before_any_step_and_status_says_why(tmp_path, fake_steps):  # noqa: F811
    """A trainer that dies with every boot leaves no newer checkpoint: the budget kept in the runs dir (the
    bucket on a VM) lets K attempts run, and the next one ends at once, with its reason in the log."""
    ctx, out = _context(tmp_path)
    record = tmp_path / "runs" / ctx.config.model / "post-train" / "budget" / resume_budget.RECORD
    for n in range(1, 4):
        assert resume_budget.refusal(ctx, BootResume(f"run-{n}", 3, 4)) is None
        assert len(json.loads(record.read_text())["resumes"]) == n
    lines = out.getvalue().splitlines()
    assert "resumed at boot: run-3 died with its boot (3 of 3 at no checkpoint)" in run_state.read(lines).line()
    assert pipeline.run(ctx, boot_resume=BootResume("run-4", 3, 4)) == 1
    assert fake_steps == []  # no step ran
    line = run_state.read(out.getvalue().splitlines()).line()
    assert line.startswith("stopped: not resumed at boot: 3 boot-resumes at no checkpoint without a newer checkpoint")


def test_an_attempt_the_start_up_did_not_begin_is_not_counted(tmp_path, fake_steps):  # noqa: F811
    ctx, out = _context(tmp_path)
    assert pipeline.run(ctx, until="convert") == 0
    assert fake_steps == ["convert"] and "boot_resume" not in out.getvalue()


def test_without_a_runs_dir_there_is_nothing_to_resume_from(tmp_path):
    ctx, out = make_context(tmp_path, PipelineConfig.from_mapping({}))
    assert "no runs dir" in (resume_budget.refusal(ctx, RESUME) or "")


def test_the_checkpoint_is_named_as_the_resume_line_names_it(tmp_path):
    """MaxText's own loop names checkpoint N the state after N+1 updates: the budget's record, its event and the
    status line say N, as `↻ train resumes from checkpoint N` does."""
    ctx, out = _context(tmp_path)
    os.makedirs(os.path.join(ctx.layout.checkpoint(10), TRAINER_LOOPS[ctx.config.trainer].weights_item))
    assert resume_budget.refusal(ctx, RESUME) is None
    assert "(1 of 3 at checkpoint 10)" in run_state.read(out.getvalue().splitlines()).line()
