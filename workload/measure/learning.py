"""Did the fine-tune learn: the held-out loss of the first pass (before the first update, the base model's) against
that of the last (after training), from the runner's records of MaxText's eval passes (workload/run/events.py
`parse_eval`). One rule, so the train step, the progress line and the stack output agree: it learned when the
last pass's loss is finite and below the first's. The eval log prints three decimals, so a change too small to
show there (a learning rate of 0, or one too small to move the weights) does not count as learning."""

from __future__ import annotations

import math
from typing import Any

CURVE_POINTS = 101  # a summary is one JSON line: a longer curve is thinned (the kept metrics hold every pass)


def curve(records: list[dict]) -> list[tuple[int, float]]:
    """Step → held-out loss, the last pass of a step winning: a resumed attempt evaluates its first step again,
    on the same examples with the same weights."""
    by_step = {r["step"]: r["eval_loss"] for r in records if "eval_loss" in r}
    return sorted(by_step.items())


def _thin(points: list[tuple[int, float]], most: int) -> list[tuple[int, float]]:
    if len(points) <= most:
        return points
    picks = sorted({round(i * (len(points) - 1) / (most - 1)) for i in range(most)})
    return [points[i] for i in picks]


def judge(points: list[tuple[int, float]]) -> dict[str, Any]:
    """The train step's facts about the held-out loss; empty when no pass was logged."""
    if not points:
        return {}
    (first_step, first), (final_step, final) = points[0], points[-1]
    finite = math.isfinite(first) and math.isfinite(final)
    facts: dict[str, Any] = {
        "eval_loss_first": first if math.isfinite(first) else None,
        "eval_loss_first_step": first_step,
        "eval_loss_final": final if math.isfinite(final) else None,
        "eval_loss_final_step": final_step,
        "eval_loss_change": round((final - first) / first, 4) if finite and first else None,
        "eval_curve": [[s, v if math.isfinite(v) else None] for s, v in _thin(points, CURVE_POINTS)],
        "learned": None if final_step == first_step else finite and final < first,
    }
    return facts


def describe(facts: dict[str, Any]) -> str | None:
    """The run's one line on it, or None where training measured no held-out loss."""
    if "learned" not in facts:
        return None
    first, final = facts["eval_loss_first"], facts["eval_loss_final"]
    start = "the base model" if facts["eval_loss_first_step"] == 0 else f"step {facts['eval_loss_first_step']}"
    change = facts.get("eval_loss_change")
    figures = f"held-out loss {_loss(first)} → {_loss(final)}"
    figures += f" ({change:+.1%})" if change is not None else ""
    figures += f", from {start} to step {facts['eval_loss_final_step']}"
    if facts["learned"] is None:
        return f"{figures}: one pass only, so nothing to compare"
    if facts["learned"]:
        return f"✓ {figures}: it learned"
    return f"⚠ {figures}: it did not fall, so the fine-tune did not learn what it was tuned for"


def refusal(facts: dict[str, Any]) -> str:
    """requireLearning's one line, for a run whose held-out loss did not fall."""
    line = (describe(facts) or "no held-out loss was measured").lstrip("⚠ ")
    return (
        f"{line}, and tpu-sft:requireLearning is true. Fix: check the data and raise tpu-sft:learningRate or "
        "tpu-sft:tokens, or pulumi config set tpu-sft:requireLearning false"
    )


def _loss(value: float | None) -> str:
    return "not finite" if value is None else f"{value:.3f}"
