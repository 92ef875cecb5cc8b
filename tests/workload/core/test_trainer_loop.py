"""How each trainer loop numbers and lays out its checkpoints (workload/core/trainer_loop.py), as the runner reads them,
without MaxText."""

from __future__ import annotations

import os

import pytest

from workload.core.config import TRAINERS, PipelineConfig
from workload.core.trainer_loop import TRAINER_LOOPS
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
