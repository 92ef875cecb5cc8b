"""Draws the training loss curve with the held-out loss beside it, and below them the throughput MaxText logged
per step (tokens/s and TFLOP/s per device), from the runner's records (JSON lines with `step` and `loss`,
`tokens_per_s_per_device`, `tflops_per_device`, or `eval_loss` for a held-out pass). Runs inside the MaxText venv
(needs matplotlib):
`python -m workload.measure.loss_curve METRICS_JSONL OUT_PNG`.
"""

from __future__ import annotations

import argparse
import json
import math
import sys


def series(metrics_path: str, key: str) -> list[tuple[int, float]]:
    """Step → value of `key`, the last record of a step winning: after a resume, the steps between the
    checkpoint and the interruption are trained, and logged, again."""
    by_step: dict[int, float] = {}
    with open(metrics_path, encoding="utf-8") as f:
        for line in f:
            record = json.loads(line)
            if record.get(key) is not None and math.isfinite(record[key]):
                by_step[record["step"]] = record[key]
    return sorted(by_step.items())


def losses(metrics_path: str) -> list[tuple[int, float]]:
    return series(metrics_path, "loss")


def draw(metrics_path: str, points: list[tuple[int, float]], out_png: str, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    marker = "." if len(points) < 50 else None
    figure, (loss_axes, rate_axes) = pyplot.subplots(
        2, 1, figsize=(8, 7), dpi=100, sharex=True, gridspec_kw={"height_ratios": [3, 2]}
    )
    loss_axes.plot([step for step, _ in points], [loss for _, loss in points], marker=marker, label="training")
    held_out = series(metrics_path, "eval_loss")
    if held_out:
        loss_axes.plot(
            [s for s, _ in held_out], [v for _, v in held_out], marker="o", color="tab:red", label="held-out"
        )
        loss_axes.legend()
    loss_axes.set_ylabel("loss")
    loss_axes.set_title(title)
    loss_axes.grid(True, alpha=0.3)
    tokens = series(metrics_path, "tokens_per_s_per_device")
    rate_axes.plot([s for s, _ in tokens], [v for _, v in tokens], marker=marker, color="tab:green")
    rate_axes.set_ylabel("tokens/s/device", color="tab:green")
    rate_axes.set_xlabel("step (the first of each attempt includes compilation)")
    rate_axes.grid(True, alpha=0.3)
    tflops = series(metrics_path, "tflops_per_device")
    if tflops:
        tflops_axes = rate_axes.twinx()
        tflops_axes.plot(
            [s for s, _ in tflops], [v for _, v in tflops], marker=marker, color="tab:orange", linestyle="--"
        )
        tflops_axes.set_ylabel("TFLOP/s/device", color="tab:orange")
    figure.tight_layout()
    figure.savefig(out_png)
    pyplot.close(figure)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workload.measure.loss_curve", description=__doc__.split("\n")[0])
    parser.add_argument("metrics_jsonl")
    parser.add_argument("out_png")
    parser.add_argument("--title", default="SFT loss")
    args = parser.parse_args(argv)
    points = losses(args.metrics_jsonl)
    if not points:
        print(f"ValueError: no finite loss in {args.metrics_jsonl}", file=sys.stderr)
        return 1
    draw(args.metrics_jsonl, points, args.out_png, args.title)
    return 0


if __name__ == "__main__":
    sys.exit(main())
