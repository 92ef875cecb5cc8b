"""Draws the training loss curve from the runner's step metrics (JSON lines with `step` and `loss`).
Runs inside the MaxText venv (needs matplotlib): `python -m workload.loss_curve METRICS_JSONL OUT_PNG`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys


def losses(metrics_path: str) -> list[tuple[int, float]]:
    """Step → loss, the last record of a step winning: after a resume, the steps between the checkpoint
    and the interruption are trained, and logged, again."""
    by_step: dict[int, float] = {}
    with open(metrics_path, encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            if record.get("loss") is not None and math.isfinite(record["loss"]):
                by_step[record["step"]] = record["loss"]
    return sorted(by_step.items())


def draw(points: list[tuple[int, float]], out_png: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    figure, axes = pyplot.subplots(figsize=(8, 4.5), dpi=100)
    axes.plot([step for step, _ in points], [loss for _, loss in points], marker="." if len(points) < 50 else None)
    axes.set_xlabel("step")
    axes.set_ylabel("training loss")
    axes.set_title(title)
    axes.grid(True, alpha=0.3)
    figure.tight_layout()
    figure.savefig(out_png)
    pyplot.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workload.loss_curve", description=__doc__.split("\n")[0])
    parser.add_argument("metrics_jsonl")
    parser.add_argument("out_png")
    parser.add_argument("--title", default="SFT training loss")
    args = parser.parse_args(argv)
    points = losses(args.metrics_jsonl)
    if not points:
        print(f"ValueError: no finite loss in {args.metrics_jsonl}", file=sys.stderr)
        return 1
    draw(points, args.out_png, args.title)
    return 0


if __name__ == "__main__":
    sys.exit(main())
