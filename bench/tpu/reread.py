"""python -m bench.tpu.reread RUN_DIR... --out DIR [--predictions FILE]: one results file from several bench runs
(one machine start each), every case's log read again with today's reader (bench/tpu/reading.py) and the preflight's
verdicts set beside them; a case run again keeps its later run. What the chip printed is the logs: this only reads
them."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from bench.tpu import table
from bench.tpu.cases import Case
from bench.tpu.run import resumed, summarize, with_prediction


def reread(run_dir: Path, record: dict[str, Any]) -> dict[str, Any]:
    case = Case.from_mapping(record["case"])
    logs = run_dir / "logs"
    if not case.resume:
        kept: dict[str, Any] = {k: record[k] for k in ("wall_s", "checkpoints_written") if k in record}
        if record.get("outcome", "").startswith("killed after"):  # the bench's own timer, which no log records
            kept["outcome"] = record["outcome"]
        return record | summarize(case, logs / f"{case.name}.log", record["returncode"], case.steps) | kept
    save, resume = (
        record[part] | summarize(case, logs / f"{case.name}-{part}.log", record[part]["returncode"], steps)
        for part, steps in (("save", case.steps), ("resume", 2 * case.steps))
    )
    return record | {"save": save, "resume": resume, "outcome": resumed(case, resume)}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tpu.reread", description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+", type=Path, help="bench run folders (results.json, logs/), oldest first")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--predictions", type=Path)
    args = parser.parse_args(argv)
    predictions = json.loads(args.predictions.read_text()) if args.predictions else {}
    by_name: dict[str, dict[str, Any]] = {}
    environments = []
    for run_dir in args.runs:
        results = json.loads((run_dir / "results.json").read_text())
        environments.append(results["environment"])
        for record in results["cases"]:
            record = with_prediction(reread(run_dir, record), predictions)
            by_name[record["case"]["name"]] = record  # a case run again: its later run
    merged = {
        "environment": environments[-1],
        "runs": environments,
        "predictions": predictions.get("environment"),
        "cases": list(by_name.values()),
    }
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "results.json").write_text(json.dumps(merged, indent=1) + "\n")
    (args.out / "results.md").write_text(table.markdown(merged) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
