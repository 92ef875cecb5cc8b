"""How each trainer loop numbers and lays out its checkpoints (workload/core/trainer_loop.py), as the runner reads them,
and the launcher's fix of MaxText's own loop's held-out sums (workload/launch/native_held_out.py), without MaxText."""

from __future__ import annotations

import os

import pytest

from workload.core.config import TRAINERS, PipelineConfig
from workload.core.trainer_loop import TRAINER_LOOPS
from workload.launch import native_held_out
from workload.run import progress
from workload.run.layout import Layout
from workload.run.steps import latest_checkpoint


def test_every_trainer_setting_has_its_loop():
    assert set(TRAINER_LOOPS) == set(TRAINERS) and PipelineConfig.trainer == "native"


@pytest.mark.parametrize(
    ("trainer", "names", "weights", "updates"),
    [
        # MaxText's own loop names the state after update s + 1 checkpoint s; its first is 0 (after update 1).
        ("native", ["0", "10", "19"], "items", 20),
        ("tunix", ["10", "20"], "model_params", 20),
    ],
)
def test_the_latest_checkpoint_counts_updates_whichever_loop_named_it(tmp_path, trainer, names, weights, updates):
    loop = TRAINER_LOOPS[trainer]
    layout = Layout(str(tmp_path), str(tmp_path / "out"), "gemma3-4b", "run")
    for name in names:
        os.makedirs(os.path.join(layout.checkpoint(int(name)), weights))
    os.makedirs(os.path.join(layout.checkpoint(99), "other"))  # not the loop's layout: not a checkpoint of it
    assert latest_checkpoint(layout, loop) == updates
    assert layout.trained_params(loop, updates) == os.path.join(layout.checkpoint(int(names[-1])), weights)


def test_a_resume_names_the_checkpoint_directory_as_it_is_in_the_bucket():
    event = {"event": "resume", "phase": "train", "from_step": 11, "checkpoint": 10, "checkpoints": "gs://b/c"}
    assert progress.render(event) == "↻ train resumes from checkpoint 10 in gs://b/c"


class _Logger:
    """What MaxText's MetricLogger does with a pass's batches: adds them up; at the pass's end, averages them."""

    def __init__(self) -> None:
        self.total = 0.0
        self.logged: list[float] = []

    def reset_eval_metrics(self) -> None:
        self.total = 0.0

    def record_eval_metrics(self, step, metrics=None, eval_step_count=None) -> None:
        self.total += metrics or 0.0
        if eval_step_count:
            self.logged.append(self.total / eval_step_count)


def test_each_held_out_pass_is_averaged_alone_and_still_read_by_the_loop_after_it_ends():
    logger = _Logger()
    record = native_held_out._each_pass_alone(_Logger.record_eval_metrics)
    for loss in (12.0, 11.0):  # the first pass: two batches
        record(logger, 9, metrics=loss)
    record(logger, 9, eval_step_count=2)
    assert logger.total == 23.0  # the loop compares the pass just ended with target_eval_loss: not cleared yet
    for loss in (10.0, 9.0):
        record(logger, 19, metrics=loss)
    record(logger, 19, eval_step_count=2)
    assert logger.logged == [11.5, 9.5]  # MaxText 0.2.2 alone would say (12 + 11 + 10 + 9) / 2 = 21
