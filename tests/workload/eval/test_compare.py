"""The paired bootstrap of base against fine-tuned scores, and the rule that calls a fine-tune worse."""

from __future__ import annotations

import json
import math

import pytest

from workload.eval.compare import TaskComparison, compare, is_worse, outcome_line


def scores(ones: int, n: int) -> list[float]:
    return [1.0] * ones + [0.0] * (n - ones)


def test_identical_scores_change_nothing():
    base = scores(71, 100)
    c = compare("gsm8k", "exact_match", base, list(base), margin_points=2, resamples=500)
    assert (c.n, c.base, c.tuned, c.delta, c.low, c.high, c.worse) == (100, 0.71, 0.71, 0.0, 0.0, 0.0, False)


def test_the_same_mean_on_other_docs_gives_an_interval_around_zero():
    base = scores(50, 200)
    tuned = list(reversed(base))  # every doc changes, the mean does not
    c = compare("ifeval", "prompt_level_strict_acc", base, tuned, margin_points=2, resamples=2000)
    assert c.delta == 0
    assert c.low < -0.08 and c.high > 0.08  # every doc moved a whole point: a wide interval
    assert not c.worse


def test_the_interval_matches_the_normal_approximation():
    # 1,000 docs: 100 gained, 150 lost. The differences' standard deviation over √n is the mean's standard error.
    base = [0.0] * 100 + [1.0] * 150 + [1.0] * 750
    tuned = [1.0] * 100 + [0.0] * 150 + [1.0] * 750
    diffs = [t - b for b, t in zip(base, tuned, strict=True)]
    mean = sum(diffs) / len(diffs)
    se = math.sqrt(sum((d - mean) ** 2 for d in diffs) / len(diffs) / len(diffs))
    c = compare("gsm8k", "exact_match", base, tuned, margin_points=2)
    assert c.delta == pytest.approx(-0.05)
    assert c.low == pytest.approx(mean - 1.96 * se, abs=0.003)
    assert c.high == pytest.approx(mean + 1.96 * se, abs=0.003)
    assert c.worse  # 5 points down, the interval [-6.9, -3.1] well below zero


def test_pairing_narrows_the_interval_where_the_models_agree():
    base = scores(700, 1000)
    tuned = [0.0] * 10 + base[10:]  # 10 docs lost, the other 990 scored alike
    c = compare("gsm8k", "exact_match", base, tuned, margin_points=2)
    independent = 1.96 * math.sqrt(2 * 0.7 * 0.3 / 1000)  # ≈ 4 points: what two unpaired scores would give
    assert (c.high - c.low) / 2 < independent / 4
    assert c.high < 0  # a real drop of 1 point...
    assert not c.worse  # ...within the 2-point margin


def test_a_clear_drop_is_worse():
    c = compare("gsm8k", "exact_match", scores(70, 100), scores(50, 100), margin_points=2, resamples=2000)
    assert c.delta == pytest.approx(-0.2)
    assert c.high < 0
    assert c.worse


@pytest.mark.parametrize(
    ("delta", "high", "margin", "worse"),
    [
        (0.69 - 0.71, -0.007, 2, False),  # a drop of exactly the margin is within it, binary rounding aside
        (-0.0201, -0.007, 2, True),  # just beyond, and real
        (-0.0201, 0.0, 2, False),  # just beyond, but the interval reaches zero: noise
        (-0.0201, 0.004, 2, False),
        (-0.001, -0.0005, 0, True),  # a margin of 0: any real drop
        (0.0, 0.0, 0, False),
        (-0.5, -0.3, 100, False),  # a margin of 100 points passes everything
    ],
)
def test_the_rule_at_its_edges(delta, high, margin, worse):
    assert is_worse(delta, high, margin) is worse


def test_compare_applies_the_rule_at_the_margin_edge():
    base, tuned = scores(710, 1000), scores(690, 1000)  # tuned lost 20 docs it had: the interval lies below zero
    exact = compare("gsm8k", "exact_match", base, tuned, margin_points=2, resamples=2000)
    assert exact.high < 0 and not exact.worse
    assert compare("gsm8k", "exact_match", base, tuned, margin_points=1.99, resamples=2000).worse


def test_a_comparison_is_judged_again_at_another_margin():
    c = compare("gsm8k", "exact_match", scores(70, 100), scores(60, 100), margin_points=2, resamples=2000)
    assert c.worse
    looser = c.at_margin(15)
    assert (looser.worse, looser.margin_points, looser.delta) == (False, 15, c.delta)
    assert looser.at_margin(2) == c


def test_the_same_seed_gives_the_same_interval():
    base, tuned = scores(60, 80), [(i * 37 % 101) / 101 for i in range(80)]  # scores between 0 and 1
    one = compare("ifeval", "prompt_level_strict_acc", base, tuned, margin_points=2, resamples=1000, seed=7)
    assert one == compare("ifeval", "prompt_level_strict_acc", base, tuned, margin_points=2, resamples=1000, seed=7)
    assert one != compare("ifeval", "prompt_level_strict_acc", base, tuned, margin_points=2, resamples=1000, seed=8)


@pytest.mark.parametrize(
    ("base", "tuned", "message"),
    [([1.0, 0.0], [1.0], "2 base scores but 1 fine-tuned"), ([], [], "no scores")],
)
def test_misaligned_or_empty_scores_are_refused(base, tuned, message):
    with pytest.raises(ValueError, match=message):
        compare("gsm8k", "exact_match", base, tuned, margin_points=2)


def test_a_comparison_survives_json():
    c = compare("ifeval", "prompt_level_strict_acc", scores(40, 50), scores(42, 50), margin_points=2, resamples=500)
    assert TaskComparison.from_json(json.loads(json.dumps(c.to_json()))) == c


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"worse": None}, "has worse=None"),
        ({"n": True}, "has n=True"),
        ({"low": "0.1"}, "has low='0.1'"),
        ({"high": ...}, "lacks high"),
    ],
)
def test_a_malformed_comparison_is_named(change, message):
    data = compare("gsm8k", "exact_match", [1.0], [1.0], margin_points=2, resamples=10).to_json()
    data.update(change)
    data = {k: v for k, v in data.items() if v is not ...}
    with pytest.raises(ValueError, match=message):
        TaskComparison.from_json(data)


def comparison(task, metric, base, tuned, low, high, margin=2.0):
    return TaskComparison(
        task, metric, 1319, base, tuned, tuned - base, low, high, margin, is_worse(tuned - base, high, margin)
    )


def test_the_outcome_line_reads_as_the_issue_shows_it():
    line = outcome_line(
        [
            comparison("ifeval", "prompt_level_strict_acc", 0.78, 0.80, 0.001, 0.039),
            comparison("gsm8k", "exact_match", 0.71, 0.69, -0.033, -0.007),
        ]
    )
    assert line == "IFEval strict 0.78 → 0.80 (+2.0 ± 1.9) · GSM8K 0.71 → 0.69 (−2.0 ± 1.3, within the margin)"


def test_the_outcome_line_says_worse_and_noise():
    worse = comparison("gsm8k", "exact_match", 0.71, 0.61, -0.14, -0.06)
    noisy = comparison("my_task", "acc", 0.50, 0.40, -0.3, 0.1)
    assert outcome_line([worse, noisy]) == (
        "GSM8K 0.71 → 0.61 (−10.0 ± 4.0, worse beyond the 2-point margin) · "
        "my_task acc 0.50 → 0.40 (−10.0 ± 20.0, within the noise)"
    )
