"""A fine-tune that learns nothing is said not to have learned (real MaxText 0.2.3, tiny profile, CPU). A learning
rate of 0 trains steps that move no weight, so the held-out pass before training and the one after read the same
loss; they read it on the same examples too, or they would differ (Tunix re-iterates the eval iterator from its
start on every pass). The run ends with the warning; with requireLearning it fails in one line instead. It starts
from the shared converted tiny model (`tiny_converted`), not the tiny pipeline's, so that it runs beside the session's
tiny pipeline, not after it."""

from __future__ import annotations

import json

import pytest

from tests.workload.tiny_run import TINY_SETTINGS, from_converted, run_workload
from workload.measure import learning

STEPS = 2
SETTINGS = {**TINY_SETTINGS, "learningRate": 0, "steps": STEPS, "evalInterval": STEPS}


@pytest.fixture(scope="module")
def unlearned(maxtext_python, tiny_converted, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("unlearned")
    work, out, config = from_converted(tiny_converted, tmp, SETTINGS)
    trained = run_workload(maxtext_python, config, work, out, "--until", "train")
    config.write_text(json.dumps({**SETTINGS, "requireLearning": True}))
    required = run_workload(maxtext_python, config, work, out, "--until", "train")
    return trained, required


def test_a_learning_rate_of_zero_ends_with_learned_false_and_the_warning(unlearned):
    trained, _ = unlearned
    summary = trained.summary
    assert trained.returncode == 0 and summary["ok"], summary  # a warning, not a failure
    assert [step for step, _ in summary["eval_curve"]] == [0, STEPS]
    assert summary["eval_loss_first"] == summary["eval_loss_final"]  # the same weights on the same examples
    assert summary["learned"] is False
    line = learning.describe(summary)
    assert line.startswith("⚠ held-out loss") and "(+0.0%)" in line and "did not fall" in line


def test_with_requirelearning_the_same_run_fails_in_one_line_without_training_again(unlearned):
    trained, required = unlearned
    assert required.returncode == 1
    assert required.summary["failed_step"] == "train" and required.phases("failed") == ["train"]
    assert required.summary["error"] == learning.refusal(trained.summary)
    assert "\n" not in required.summary["error"]
    assert not [e for e in required.events if e["event"] in ("step", "eval")]  # the checkpoint was final already
