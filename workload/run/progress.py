"""Renders the workload's JSON-lines events (workload/run/events.py) as one readable line each: what `pulumi up`
shows while a phase runs. Beside the event format, so the two change together."""

from __future__ import annotations

import json
from collections.abc import Callable, Collection
from typing import Any, TextIO

from workload.core.duration import duration


def parse_event(text: str) -> dict[str, Any] | None:
    """One event of a job's log, or None for any other line: the job's stdout holds only events, but its log also
    catches its stderr."""
    try:
        event = json.loads(text)
    except json.JSONDecodeError:
        return None
    return event if isinstance(event, dict) and "event" in event else None


class ProgressPrinter:
    """Prints each event as a line and keeps the summary event (the job's last line) for the caller. A phase's
    part of the run (remote/pipeline/part.py) shows fewer events and keeps another summary."""

    def __init__(self, out: TextIO, *, quiet: bool = False):
        self.out, self.quiet = out, quiet
        self.summary: dict[str, Any] | None = None

    def line(self, text: str) -> None:
        event = parse_event(text)
        if event is None:
            return  # it stays in the job's log on the host
        if event["event"] == "summary":
            self.keep_summary(event)
        elif self.shows(event) and not self.quiet and (rendered := render(event)):
            print(rendered, file=self.out, flush=True)

    def keep_summary(self, event: dict[str, Any]) -> None:
        self.summary = event

    def shows(self, event: dict[str, Any]) -> bool:
        return True


# A phase event's line by its status.
_PHASE_LINES = {
    "start": "▶ {phase}",
    "done": "✓ {phase} done in {seconds:.0f} s",
    "skipped": "· {phase} skipped: {reason}",
    "failed": "✗ {phase} failed after {seconds:.0f} s: {cause}",
}

# What a training step's line shows after its count, in this order, each where its key is in the event.
STEP_FACTS: dict[str, Callable[[dict[str, Any]], str]] = {
    "loss": lambda e: f"loss {e['loss']:.4f}",
    "step_seconds": lambda e: f"{e['step_seconds']:.2f} s/step",
    "tokens_per_s_per_device": lambda e: f"{e['tokens_per_s_per_device']:.0f} tokens/s/device",
    "tflops_per_device": lambda e: f"{_tflops(e['tflops_per_device'])} TFLOP/s/device",
    "mfu": lambda e: f"MFU {e['mfu']:.1%}",
    "eval_step": lambda e: f"held-out loss {_loss(e.get('eval_loss'))} at step {e['eval_step']}",
    "eta_s": lambda e: f"ETA {duration(e['eta_s'])}",
    "cost_usd": lambda e: f"${e['cost_usd']:.2f} so far",
}


def step_facts(e: dict[str, Any], keys: Collection[str] = STEP_FACTS.keys()) -> list[str]:
    """The facts of STEP_FACTS, of those named in `keys`, that the step event `e` holds."""
    return [show(e) for key, show in STEP_FACTS.items() if key in keys and e.get(key) is not None]


def render(e: dict[str, Any]) -> str | None:
    kind, phase = e["event"], e.get("phase", "?")
    if kind == "phase":
        line = _PHASE_LINES.get(e.get("status", ""))
        if line is not None:
            seconds, reason, cause = e.get("seconds", 0), e.get("reason", "already done"), e.get("cause", "")
            return line.format(phase=phase, seconds=seconds, reason=reason, cause=cause)
    if kind == "resume":
        data = f"; data {e['data']}" if e.get("data") else ""
        # The checkpoint as its directory is named: with MaxText's own loop, one less than the updates it holds.
        checkpoint = e.get("checkpoint", e.get("from_step"))
        return f"↻ {phase} resumes from checkpoint {checkpoint} in {e.get('checkpoints', '?')}{data}"
    if kind == "step":
        return " · ".join([f"{phase} step {e.get('step')}/{e.get('steps')}", *step_facts(e)])
    if kind == "eval":
        return f"{phase} held-out loss at step {e.get('step')}: {_loss(e.get('eval_loss'))}"
    if kind == "progress":
        return f"{phase}: {e.get('message')}"
    if kind == "error":
        tail = "\n".join(f"    {line}" for line in e.get("tail", [])[-10:])
        return f"✗ {phase}: {e.get('cause')}" + (f"\n  log tail ({e.get('log')}):\n{tail}" if tail else "")
    return None


def _loss(value: float | None) -> str:
    return "not finite" if value is None else f"{value:.4f}"


def _tflops(value: float) -> str:
    """Three significant figures: 0.0162 on a CPU, 412 on a TPU chip."""
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"
