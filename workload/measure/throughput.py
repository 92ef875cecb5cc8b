"""How well training used the chips: TFLOP/s per device, MFU, tokens/s and goodput, from MaxText's own output.

MaxText's MetricLogger logs per step `TFLOP/s/device` (the model FLOPs of one step, from
`maxtext_utils.calculate_tflops_training_per_device`, over the step's time) and `Tokens/s/device`; at start it
logs the device count; orbax logs how long each checkpoint save held training up. MFU is TFLOP/s/device over
the peak of the chips that ran, by the device kind the trainer's launcher prints (workload/measure/devices.py):
Google's bf16 figure per chip (workload/core/accelerators.py PEAK_BF16_TFLOPS), on whichever TPU it was — the
lent v5e as much as a v6e. A CPU has no published peak, so there the MFU is null with the reason.

Goodput is the share of the train phase's wall time spent in training steps: the steps' own time (MaxText
measures step end to step end, so loading the next batch counts as step time), less the checkpoint saves inside it,
and only for steps that were kept (steps re-trained after a resume count once, in the attempt that kept them).
The rest is split into imports, setup (loading the checkpoint, building the data pipeline), the first step
of each attempt (XLA compilation), checkpoint saves, held-out evaluation (Tunix's passes, from its "Running
evaluation" line to MaxText's eval metrics line; a pass inside training also lands in its step's own time, which
MaxText measures from one step's logging to the next, so it is taken out of that step's) and other (shutdown
after the last step, steps trained again after a resume); an attempt killed with the runner has no timeline:
its time beyond its kept steps is all other.
"""

from __future__ import annotations

import math
import re
import statistics
from typing import Any

from workload.core.accelerators import PEAK_BF16_TFLOPS
from workload.measure import devices as devices_line
from workload.measure import hbm_peak

_DEVICES = re.compile(r"Num_devices: (\d+)")
_STEP = re.compile(r"completed step: (\d+)")
# Marks in MaxText's log, in the order they appear: the first line after pyconfig (imports done), the
# parameter count logged by the training hooks' on_train_start (model and data ready, step 1 compiles next).
_MARKS = {
    "imported": re.compile(r"System Information: Jax Version"),
    "training_started": re.compile(r"number parameters: "),
    "first_step": _STEP,
}
# Tunix logs the start of a held-out pass; MaxText's MetricLogger its end (workload/run/events.py parse_eval).
_EVAL_START = re.compile(r"Running evaluation on train step (\d+)")
_EVAL_END = re.compile(r"Completed eval after train step (-?\d+)")
# orbax event_tracking: a synchronous save blocks for all of it; an async one for its blocking part only.
_SAVE_BLOCKED = re.compile(r"\[sync\] Finished save in ([\d.]+) seconds|\[async\] Finished blocking save in ([\d.]+) s")


def peak_tflops_per_device(device_kind: str | None) -> tuple[float | None, str | None]:
    """The peak to measure MFU against, or None and why there is none."""
    if device_kind in PEAK_BF16_TFLOPS:
        return PEAK_BF16_TFLOPS[device_kind], None
    return None, f"no peak FLOP/s known for {device_kind or 'devices the trainer did not name'}"


class AttemptTimeline:
    """Where one training attempt's time went, read from MaxText's output line by line: seconds from the
    attempt's start to each mark, the blocking seconds of checkpoint saves, the backend and device count, and the
    chips' kind and HBM peak as the trainer's launcher printed them (workload/measure/devices.py, hbm_peak.py).

    A save blocks inside the time of the step logged next (MaxText measures a step from one step's logging to the
    next): `saves_in_steps` holds [step, seconds] for each step that held saves. Saves after the last step logged
    (the final one, or one a kill cut off) are inside no step's time: `trailing_checkpoint_s`."""

    def __init__(self, started: float):
        self.started = started
        self.facts: dict[str, Any] = {"saves_in_steps": [], "trailing_checkpoint_s": 0.0, "saves": 0}
        self._eval_started: float | None = None

    @property
    def device_kind(self) -> str | None:
        return self.facts.get("device_kind")

    def observe(self, line: str, now: float) -> None:
        if found := _SAVE_BLOCKED.search(line):
            self.facts["trailing_checkpoint_s"] = round(
                self.facts["trailing_checkpoint_s"] + float(found.group(1) or found.group(2)), 3
            )
            self.facts["saves"] += 1
        elif (step := _STEP.search(line)) and self.facts["trailing_checkpoint_s"]:
            self.facts["saves_in_steps"].append([int(step.group(1)), self.facts["trailing_checkpoint_s"]])
            self.facts["trailing_checkpoint_s"] = 0.0
        if _EVAL_START.search(line):
            self._eval_started = now
        elif (found := _EVAL_END.search(line)) and self._eval_started is not None:
            # [step, seconds, whether training had started]: a pass before it is part of setup's time
            passes = self.facts.setdefault("eval_passes", [])
            passes.append([int(found.group(1)), round(now - self._eval_started, 3), "training_started_s" in self.facts])
            self._eval_started = None
        for mark, pattern in _MARKS.items():
            if f"{mark}_s" not in self.facts and pattern.search(line):
                self.facts[f"{mark}_s"] = round(now - self.started, 3)
        if "device_kind" not in self.facts and (named := devices_line.parse(line)):
            self.facts.update(backend=named["platform"], device_kind=named["device_kind"])
        if "devices" not in self.facts and (found := _DEVICES.search(line)):
            self.facts["devices"] = int(found.group(1))
        if (hbm := hbm_peak.parse(line)) is not None:
            self.facts.update(hbm)


def _finite(records: list[dict], key: str) -> list[float]:
    return [r[key] for r in records if r.get(key) is not None and math.isfinite(r[key])]


def _kept_steps(metrics: list[dict]) -> tuple[list[dict], list[dict]]:
    """The record that counts for each step (its last attempt), split into first-of-attempt steps (they
    carry the compilation) and the steady ones."""
    by_step = {r["step"]: r for r in metrics}
    first_of: dict[float | None, int] = {}
    for r in metrics:
        first_of[r.get("attempt")] = min(first_of.get(r.get("attempt"), r["step"]), r["step"])
    kept = sorted(by_step.values(), key=lambda r: r["step"])
    steady = [r for r in kept if r["step"] != first_of[r.get("attempt")]]
    return [r for r in kept if r not in steady], steady


def train_figures(attempts: list[dict], metrics: list[dict], wall_s: float) -> dict[str, Any]:
    """The train summary's throughput facts. Rates are medians over the steady steps (not the first step
    of an attempt); tokens/s is per device times MaxText's device count."""
    ended = [a for a in attempts if "seconds" in a]
    latest: dict[str, Any] = next((a for a in reversed(ended) if a.get("backend")), {})
    backend, kind, devices = latest.get("backend"), latest.get("device_kind"), latest.get("devices")
    metrics = [r for r in metrics if "eval_loss" not in r]  # held-out passes' records: not steps
    first, steady = _kept_steps(metrics)
    tflops = _finite(steady, "tflops_per_device")
    tokens = _finite(steady, "tokens_per_s_per_device")
    tflops_per_device = round(statistics.median(tflops), 3) if tflops else None
    tokens_per_device = round(statistics.median(tokens), 1) if tokens else None
    peak, no_peak = peak_tflops_per_device(kind)
    figures: dict[str, Any] = {
        "backend": backend,
        "device_kind": kind,
        "devices": devices,
        "tflops_per_device": tflops_per_device,
        "peak_tflops_per_device": peak,
        "mfu": round(tflops_per_device / peak, 4) if peak and tflops_per_device is not None else None,
        "tokens_per_s_per_device": tokens_per_device,
        "tokens_per_s": round(tokens_per_device * devices, 1) if tokens_per_device is not None and devices else None,
    }
    if figures["mfu"] is None:
        figures["mfu_reason"] = no_peak or "MaxText logged no TFLOP/s/device"
    figures.update(goodput(ended, first, steady, wall_s))
    return figures


def goodput(ended: list[dict], first: list[dict], steady: list[dict], wall_s: float) -> dict[str, Any]:
    saves = [(a["attempt"], step, s) for a in ended for step, s in a.get("saves_in_steps", [])]
    all_saves = sum(s for _, _, s in saves) + sum(a.get("trailing_checkpoint_s", 0.0) for a in ended)
    passes = [(a["attempt"], step, s, inside) for a in ended for step, s, inside in a.get("eval_passes", [])]
    kept = {(r.get("attempt"), r["step"]) for r in steady}
    kept_first = {(r.get("attempt"), r["step"]) for r in first}
    # A save or a pass inside a step trained again later is inside no kept step's time: not taken from theirs.
    steady_saves = sum(s for attempt, step, s in saves if (attempt, step) in kept)
    first_saves = sum(s for attempt, step, s in saves if (attempt, step) in kept_first)
    in_steps = sum(s for attempt, step, s, inside in passes if inside and (attempt, step) in kept)
    steps = max(sum(_finite(steady, "step_seconds")) - steady_saves - in_steps, 0.0)
    split = {
        "imports": sum(a.get("imported_s", 0.0) for a in ended),
        "setup": sum(
            a["training_started_s"] - a["imported_s"] for a in ended if "training_started_s" in a and "imported_s" in a
        )
        - sum(s for _, _, s, inside in passes if not inside),
        "first_steps": max(sum(_finite(first, "step_seconds")) - first_saves, 0.0),
        "checkpoints": all_saves,
        "eval": sum(s for _, _, s, _ in passes),
        "steps": steps,
    }
    split["other"] = max(wall_s - sum(split.values()), 0.0)
    return {
        "goodput": round(steps / wall_s, 4) if wall_s > 0 else None,
        "time_split_s": {k: round(v, 1) for k, v in split.items()},
    }
