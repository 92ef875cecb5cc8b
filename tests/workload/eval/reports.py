"""Eval reports as the eval step writes them (`<kept model>/eval/report.json`), made by `compare` from per-sample
scores, for the tests of the gate, the publish CLI and the model card."""

from __future__ import annotations

import functools
import json
from pathlib import Path

from workload.eval.compare import TaskComparison, compare
from workload.eval.gate import REPORT


def scores(ones: int, n: int) -> list[float]:
    return [1.0] * ones + [0.0] * (n - ones)


@functools.cache
def comparisons(gsm8k_tuned: int = 690) -> tuple[TaskComparison, ...]:
    """IFEval strict 0.78 → 0.80 over 541 prompts, and GSM8K 0.71 → gsm8k_tuned/1000 over 1,000 questions, the
    fine-tune losing only docs the base had right (so any drop is real)."""
    return (
        compare(
            "ifeval", "prompt_level_strict_acc", scores(422, 541), scores(433, 541), margin_points=2, resamples=2000
        ),
        compare("gsm8k", "exact_match", scores(710, 1000), scores(gsm8k_tuned, 1000), margin_points=2, resamples=2000),
    )


def write_report(model_dir: Path, tasks: tuple[TaskComparison, ...] | None = None) -> Path:
    """The report beside the kept model, in the eval step's shape (by default one the gate passes), written after keep's
    manifest, as the eval step runs after keep."""
    tasks = comparisons() if tasks is None else tasks
    path = model_dir / REPORT
    path.parent.mkdir(parents=True, exist_ok=True)
    report = {
        "tasks": [t.to_json() for t in tasks],
        "key": {"base": "google/gemma-3-4b-it", "tasks": [t.task for t in tasks], "limit": None},
        "lm_eval": "0.4.13",
        "generation": {"temperature": 0.0, "max_gen_toks": 1280},
        "limit": None,
        "models": {"base": "google/gemma-3-4b-it", "tuned": str(model_dir / "hf-model")},
    }
    path.write_text(json.dumps(report, indent=1))
    return path
