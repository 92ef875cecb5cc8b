"""The runner's progress stream: one JSON object per stdout line, parsed from MaxText/Tunix output.

A caller (the remote CLI over SSH, a Pulumi `local.Command`) keeps the whole stdout, so step events are
bounded: at most one every `step_interval` seconds and one per 1% of the steps, plus the last step of each
training attempt — a few hundred lines at most, however long the run.
Every MaxText subprocess's full raw log stays in `<work>/logs/`. All events carry `event` and `t` (Unix
time, seconds); the others:

    {"event": "phase", "phase": P, "status": "start", "reason": "not done yet" | "its inputs changed" | …}
    {"event": "phase", "phase": P, "status": "done", "seconds": S, ...step facts}
    {"event": "phase", "phase": P, "status": "skipped", "reason": "done with the same inputs", ...step facts}
    {"event": "phase", "phase": P, "status": "failed", "seconds": S, "cause": ONE_LINE}
    {"event": "resume", "phase": "train", "from_step": N, "checkpoint": C, "checkpoints": URL, "data": WHY}
                                                           training continues after update N, from the checkpoint
                                                           directory C (workload/core/trainer_loop.py numbers it)
    {"event": "step", "phase": "train", "step": N, "steps": TOTAL, "loss": L, "step_seconds": S,
     "tokens_per_s_per_device": T, "tflops_per_device": F, "mfu": M, "eta_s": E, "cost_usd": C,
     "eval_loss": V, "eval_step": K}
                                                                loss/rate fields only when MaxText printed
                                                                them; null when not finite (NaN/inf loss);
                                                                mfu only where the peak is known (TPU);
                                                                cost_usd: the VM's bill so far (bill.py), when known;
                                                                eval_loss: the last held-out pass's, at step K
    {"event": "eval", "phase": "train", "step": K, "eval_loss": V}  a held-out pass ended (null: not finite)
    {"event": "progress", "phase": "eval", "message": ONE_LINE}   what the eval step is doing, or found
                                                                (workload/run/eval_step.py)
    {"event": "error", "phase": P, "cause": ONE_LINE, "log": PATH, "tail": [LAST_LOG_LINES]}
    {"event": "summary", ...}                                   always the very last line (see pipeline.py)

P is one of assets (tiny profile only), convert, train, export, verify, keep, eval; an error before any step
(bad settings, unreadable token file, work dir in use by another runner) has phase "setup". Lines are at
most a few KB: the tail is capped in lines and characters (workload/launch/exit_reason.py `cap_tail`).
"""

from __future__ import annotations

import json
import math
import re
import statistics
import sys
import time
from collections import deque
from typing import Any, Callable, TextIO

# MaxText's MetricLogger: "completed step: 7, seconds: 0.912, TFLOP/s/device: …, Tokens/s/device: 140.3,
# total_weights: 88, loss: 11.904, lm_loss: …"; tqdm's progress bar may precede it on the same line.
_STEP = re.compile(r"completed step: (\d+)")
_FIELDS = {
    "step_seconds": re.compile(r"\bseconds: ([-+\w.]+)"),
    "tokens_per_s_per_device": re.compile(r"Tokens/s/device: ([-+\w.]+)"),
    "tflops_per_device": re.compile(r"TFLOP/s/device: ([-+\w.]+)"),
    "loss": re.compile(r"\bloss: ([-+\w.]+)"),
}
# A held-out pass, through MaxText's MetricLogger: "Completed eval after train step 10, loss=2.301, perplexity=…" (not
# its per-batch "Completed eval step: 0, …, running loss=…"). Each loop numbers steps its own way
# (workload/core/trainer_loop.py): MaxText's own loop's pass before its first update is -1.
_EVAL = re.compile(r"Completed eval after train step (-?\d+), loss=([-+\w.]+)")


def parse_step(line: str) -> dict[str, Any] | None:
    """A training step record from one MaxText log line, or None for any other line."""
    match = _STEP.search(line)
    if not match:
        return None
    record: dict[str, Any] = {"step": int(match.group(1))}
    for key, pattern in _FIELDS.items():
        found = pattern.search(line, match.end())
        if found:
            try:
                record[key] = float(found.group(1))
            except ValueError:
                continue
    return record


def parse_eval(line: str) -> dict[str, Any] | None:
    """A held-out pass's record, {"step", "eval_loss"}, from one MaxText log line, or None for any other line."""
    match = _EVAL.search(line)
    if not match:
        return None
    try:
        return {"step": int(match.group(1)), "eval_loss": float(match.group(2))}
    except ValueError:
        return None


class StepProgress:
    """Turns one training attempt's step records into step events: ETA from the median of recent step
    times, skipping the attempt's first step, which carries the compilation (minutes on CPU, while later
    steps take a second). MFU is MaxText's model TFLOP/s per device over the device's peak, when known."""

    def __init__(self, total_steps: int, peak_tflops_per_device: float | None = None):
        self.total_steps = total_steps
        self.peak_tflops_per_device = peak_tflops_per_device
        self._times: deque[float] = deque(maxlen=20)
        self._first_of_attempt = True
        self._held_out: dict[str, Any] = {}
        self._pass_at: int | None = None

    def held_out(self, record: dict[str, Any]) -> dict[str, Any]:
        """A held-out pass's event fields; later step events carry them too. MaxText logs the step the pass came
        after once the pass has ended, its time holding the pass's: not a step time to estimate from."""
        self._pass_at = record["step"]
        loss = record["eval_loss"]
        self._held_out = {"eval_loss": loss if math.isfinite(loss) else None, "eval_step": record["step"]}
        return {"step": record["step"], "eval_loss": self._held_out["eval_loss"]}

    def fields(self, record: dict[str, Any]) -> dict[str, Any]:
        fields = {"step": record["step"], "steps": self.total_steps}
        for key in ("loss", "step_seconds", "tokens_per_s_per_device", "tflops_per_device"):
            value = record.get(key)
            if value is not None:
                fields[key] = value if math.isfinite(value) else None  # JSON has no NaN; null says "not finite"
        if self.peak_tflops_per_device and fields.get("tflops_per_device") is not None:
            fields["mfu"] = round(fields["tflops_per_device"] / self.peak_tflops_per_device, 4)
        seconds = record.get("step_seconds")
        if seconds is not None and not self._first_of_attempt and record["step"] != self._pass_at:
            self._times.append(seconds)
        self._first_of_attempt = False
        if self._times:
            fields["eta_s"] = round(statistics.median(self._times) * max(self.total_steps - record["step"], 0), 1)
        return {**fields, **self._held_out}


class Events:
    def __init__(
        self, out: TextIO | None = None, *, step_interval: float = 5.0, clock: Callable[[], float] = time.monotonic
    ):
        self._out = out or sys.stdout
        self._interval = step_interval
        self._clock = clock
        self._last_step_at: float | None = None
        self._last_step = 0
        self._pending: dict[str, Any] | None = None
        self.listeners: list[Callable[[str], None]] = []  # each line as written (workload/run/log_mirror.py)

    def emit(self, event: str, **fields: Any) -> None:
        record = {"event": event, "t": round(time.time(), 3), **fields}
        line = json.dumps(record, allow_nan=False, default=str)
        self._out.write(line + "\n")
        self._out.flush()
        for listener in self.listeners:
            listener(line)

    def step(self, phase: str, fields: dict[str, Any]) -> None:
        """Emit now if the last step event is old and far enough behind; otherwise keep it for
        `flush_steps`. `fields` holds `step` and `steps` (the total)."""
        now = self._clock()
        min_gap = math.ceil(fields["steps"] / 100)
        if self._last_step_at is None or (
            now - self._last_step_at >= self._interval and fields["step"] - self._last_step >= min_gap
        ):
            self._last_step_at, self._last_step = now, fields["step"]
            self._pending = None
            self.emit("step", phase=phase, **fields)
        else:
            self._pending = {"phase": phase, **fields}

    def flush_steps(self) -> None:
        """The last step always reaches the stream (called when a training attempt ends)."""
        if self._pending is not None:
            pending, self._pending = self._pending, None
            self._last_step_at, self._last_step = self._clock(), pending["step"]
            self.emit("step", **pending)
