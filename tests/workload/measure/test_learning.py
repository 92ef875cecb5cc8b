"""Did it learn: the held-out loss of the first pass against the last, one rule for the line, the summary and the
stack output."""

import math

from workload.measure import learning


def records(*points, attempt=1.0):
    return [{"step": s, "eval_loss": v, "attempt": attempt} for s, v in points]


def test_the_curve_keeps_one_pass_per_step_and_ignores_training_steps():
    metrics = [{"step": 1, "loss": 9.0}, *records((0, 2.5), (10, 2.2)), *records((10, 2.2), (20, 2.0), attempt=2.0)]
    assert learning.curve(metrics) == [(0, 2.5), (10, 2.2), (20, 2.0)]


def test_a_fall_from_the_base_model_is_learning():
    facts = learning.judge([(0, 2.5), (10, 2.2), (20, 2.0)])
    assert facts["learned"] is True
    assert (facts["eval_loss_first"], facts["eval_loss_final"], facts["eval_loss_change"]) == (2.5, 2.0, -0.2)
    assert facts["eval_curve"] == [[0, 2.5], [10, 2.2], [20, 2.0]]
    assert learning.describe(facts) == (
        "✓ held-out loss 2.500 → 2.000 (-20.0%), from the base model to step 20: it learned"
    )


def test_no_fall_is_said_plainly_and_requirelearning_refuses_it_in_one_line():
    facts = learning.judge([(0, 2.5), (20, 2.5)])  # a learning rate of 0: the same loss to three decimals
    assert facts["learned"] is False
    line = learning.describe(facts)
    assert line.startswith("⚠ held-out loss 2.500 → 2.500 (+0.0%)") and "did not fall" in line
    refusal = learning.refusal(facts)
    assert "\n" not in refusal and refusal.startswith("held-out loss 2.500")
    assert "tpu-sft:requireLearning is true. Fix:" in refusal and "requireLearning false" in refusal


def test_a_rise_or_a_non_finite_loss_is_not_learning():
    assert learning.judge([(0, 2.5), (20, 2.6)])["learned"] is False
    diverged = learning.judge([(0, 2.5), (20, math.nan)])
    assert diverged["learned"] is False and diverged["eval_loss_final"] is None
    assert "2.500 → not finite" in learning.describe(diverged)


def test_a_first_pass_after_step_zero_is_named_and_one_pass_judges_nothing():
    resumed = learning.judge([(10, 2.2), (20, 2.0)])
    assert "from step 10 to step 20" in learning.describe(resumed)
    single = learning.judge([(0, 2.5)])
    assert single["learned"] is None and "one pass only" in learning.describe(single)
    assert "requireLearning is true" in learning.refusal(single)


def test_without_passes_there_are_no_facts_and_no_line():
    assert learning.judge([]) == {} and learning.describe({}) is None


def test_a_long_curve_is_thinned_to_a_bounded_line_keeping_both_ends():
    points = [(s, 3.0 - s / 10_000) for s in range(10_001)]
    curve = learning.judge(points)["eval_curve"]
    assert len(curve) == learning.CURVE_POINTS and curve[0] == [0, 3.0] and curve[-1] == [10_000, 2.0]
