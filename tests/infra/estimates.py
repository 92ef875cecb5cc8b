"""What the eval phase adds to a preview's run estimate (infra/pricing/eval_cost.py), read from its outputs: the
first run's upper end, 0 where the stack's eval is off."""

from __future__ import annotations

from typing import Any


def eval_hours(outputs: dict[str, Any]) -> float:
    shown = outputs.get("evalEstimate")
    return 0.0 if shown is None else round(shown["firstRun"]["minutes"][1] / 60, 3)
