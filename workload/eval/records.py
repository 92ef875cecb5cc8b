"""Per-sample records, read from lm-eval's own `--log_samples` output (never recomputed): for each task, one record a
doc with the gate's metric (workload/core/eval_tasks.py) and the ones kept beside it, as floats.

lm-eval 0.4.13 writes `<output>/<model>/samples_<task>_<date>.jsonl`, one line per doc and filter, with `doc_id`,
`filter` and each metric's value under its own name (IFEval's prompt-level ones are booleans, GSM8K's exact_match a
float), and `results_<date>.json` beside them.
"""

from __future__ import annotations

import glob
import json
import os
from typing import Any

from workload.core.eval_tasks import EvalTask


class RecordsMissing(ValueError):
    """lm-eval wrote no samples for a task, or samples without the metric: one line naming the file."""


def samples_file(output_dir: str, lm_eval_task: str) -> str:
    """The newest samples file lm-eval wrote for `lm_eval_task` under `output_dir`."""
    found = sorted(glob.glob(os.path.join(output_dir, "**", f"samples_{lm_eval_task}_*.jsonl"), recursive=True))
    if not found:
        raise RecordsMissing(f"lm-eval wrote no samples for {lm_eval_task} under {output_dir}")
    return max(found, key=os.path.getmtime)


def results_file(output_dir: str) -> str:
    found = glob.glob(os.path.join(output_dir, "**", "results_*.json"), recursive=True)
    if not found:
        raise RecordsMissing(f"lm-eval wrote no results under {output_dir}")
    return max(found, key=os.path.getmtime)


def read(output_dir: str, task: EvalTask, lm_eval_task: str) -> list[dict[str, Any]]:
    """`[{"doc_id": int, "score": float, <also>: float, …}]` in doc order, from the lines of the task's filter."""
    path = samples_file(output_dir, lm_eval_task)
    records = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            sample = json.loads(line)
            if sample.get("filter") != task.filter:
                continue
            try:
                record = {"doc_id": int(sample["doc_id"]), "score": float(sample[task.metric])}
                record |= {name: float(sample[name]) for name in task.also}
            except (KeyError, TypeError, ValueError) as error:
                raise RecordsMissing(f"{path}: a sample lacks {error} for filter {task.filter}") from None
            records.append(record)
    if not records:
        raise RecordsMissing(f"{path} has no samples of filter {task.filter}")
    return sorted(records, key=lambda r: r["doc_id"])


def write(path: str, records: list[dict[str, Any]]) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        f.writelines(json.dumps(r) + "\n" for r in records)


def load(path: str) -> list[dict[str, Any]]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]
