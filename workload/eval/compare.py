"""One benchmark task's scores, base against fine-tuned, and whether the fine-tune is worse beyond the margin.

The scores are per sample (one per doc id of lm-eval's `--log_samples`, 0/1 for IFEval's prompt-level accuracy and
GSM8K's exact match), aligned: `base[i]` and `tuned[i]` score the same doc. The interval is a paired bootstrap of
tuned − base: each resample draws doc ids with replacement and scores both models on the same draw, so the noise
both models share (hard docs, easy docs) cancels, and the interval is narrower than two independent ones.

The rule, in points (a score of 0.78 is 78 points; the margin is in points): the fine-tune is **worse** when

    its mean is below the base's by more than the margin  (base − tuned > margin)
    and the drop is real: the whole 95 % interval of tuned − base lies below zero  (high < 0).

A drop of exactly the margin is within it; a drop beyond the margin whose interval still reaches zero is noise (a
quick run's few samples). Both must hold, so neither a small real drop nor a large noisy one blocks publishing.
docs/publishing.md ("The quality gate") says the same to the user.
"""

from __future__ import annotations

import math
import random
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

CONFIDENCE = 0.95
# Points are compared after rounding, so 0.69 − 0.71 (−0.020000000000000018 in binary) is a drop of exactly 2.
_POINT_DIGITS = 9

# How the line names lm-eval's tasks and metrics; a name not here is shown as lm-eval spells it.
TASK_LABELS = {"ifeval": "IFEval", "gsm8k": "GSM8K"}
METRIC_LABELS = {
    "prompt_level_strict_acc": "strict",
    "prompt_level_loose_acc": "loose",
    "inst_level_strict_acc": "instruction strict",
    "inst_level_loose_acc": "instruction loose",
    "exact_match": "",
    "exact_match,strict-match": "",
    "exact_match,flexible-extract": "flexible",
}


@dataclass(frozen=True)
class TaskComparison:
    """One task's metric for both models. Scores and the interval are fractions (lm-eval's), the margin is in
    points; `worse` is the module's rule at `margin_points`."""

    task: str
    metric: str
    n: int
    base: float
    tuned: float
    delta: float  # tuned − base
    low: float  # the 95 % paired-bootstrap interval of tuned − base
    high: float
    margin_points: float
    worse: bool

    @property
    def label(self) -> str:
        """`IFEval strict`, `GSM8K`: the task and metric as the user reads them."""
        metric = METRIC_LABELS.get(self.metric, self.metric)
        return " ".join(part for part in (TASK_LABELS.get(self.task, self.task), metric) if part)

    def at_margin(self, margin_points: float) -> TaskComparison:
        """The same comparison judged at another margin: the gate's margin is a publish setting, which may differ
        from the one the eval step judged at, and changing it must not re-run the eval."""
        return replace(self, margin_points=margin_points, worse=is_worse(self.delta, self.high, margin_points))

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Any) -> TaskComparison:
        """Raises ValueError naming what is missing or mistyped (a report written by another version)."""
        if not isinstance(data, dict):
            raise ValueError(f"a task's comparison is {type(data).__name__}, not an object")
        missing = [f.name for f in fields(cls) if f.name not in data]
        if missing:
            raise ValueError(f"a task's comparison lacks {', '.join(missing)}")
        values = {f.name: data[f.name] for f in fields(cls)}
        kinds = {"task": str, "metric": str, "n": int, "worse": bool}
        for name, value in values.items():
            kind = kinds.get(name)
            number = isinstance(value, (int, float)) and not isinstance(value, bool)
            exact = kind is not None and isinstance(value, kind) and (kind is bool or not isinstance(value, bool))
            if not (exact if kind is not None else number):
                raise ValueError(f"a task's comparison has {name}={value!r}")
        return cls(**values)


def points(fraction: float) -> float:
    return round(fraction * 100, _POINT_DIGITS)


def is_worse(delta: float, high: float, margin_points: float) -> bool:
    """The module's rule: a drop beyond the margin whose interval lies wholly below zero."""
    return -points(delta) > margin_points and high < 0


def _percentile(ordered: list[float], q: float) -> float:
    """The nearest-rank percentile of a sorted list."""
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def compare(
    task: str,
    metric: str,
    base: Sequence[float],
    tuned: Sequence[float],
    *,
    margin_points: float,
    resamples: int = 10000,
    seed: int = 0,
) -> TaskComparison:
    """Compares aligned per-sample scores; the same inputs and seed give the same interval."""
    if len(base) != len(tuned):
        raise ValueError(f"{task} {metric}: {len(base)} base scores but {len(tuned)} fine-tuned ones")
    if not base:
        raise ValueError(f"{task} {metric}: no scores to compare")
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, not {resamples}")
    n = len(base)
    differences = [t - b for b, t in zip(base, tuned, strict=True)]
    rng = random.Random(seed)
    means = sorted(math.fsum(rng.choices(differences, k=n)) / n for _ in range(resamples))
    tail = (1 - CONFIDENCE) / 2
    delta = math.fsum(differences) / n
    low, high = _percentile(means, tail), _percentile(means, 1 - tail)
    return TaskComparison(
        task=task,
        metric=metric,
        n=n,
        base=math.fsum(base) / n,
        tuned=math.fsum(tuned) / n,
        delta=delta,
        low=low,
        high=high,
        margin_points=margin_points,
        worse=is_worse(delta, high, margin_points),
    )


def _signed(value: float) -> str:
    shown = round(value, 1)
    return f"{'−' if shown < 0 else '+'}{abs(shown):.1f}"


def outcome(comparison: TaskComparison, *, judged: bool = True) -> str:
    """`GSM8K 0.71 → 0.69 (−2.0 ± 1.3, within the margin)`: the scores, the change in points, half the 95 %
    interval's width (the interval need not be symmetric; the report keeps its ends) and, if `judged`, the verdict."""
    c = comparison
    spread = points(c.high - c.low) / 2
    if not judged:
        note = " points"
    elif c.worse:
        note = f", worse beyond the {c.margin_points:g}-point margin"
    elif round(points(c.delta), 1) >= 0:
        note = ""
    elif -points(c.delta) <= c.margin_points:
        note = ", within the margin"
    else:
        note = ", within the noise"
    return f"{c.label} {c.base:.2f} → {c.tuned:.2f} ({_signed(points(c.delta))} ± {spread:.1f}{note})"


def outcome_line(comparisons: Iterable[TaskComparison]) -> str:
    """Every task's outcome on one line, as the phases output and `tpu-sft status` show it."""
    return " · ".join(outcome(c) for c in comparisons)
