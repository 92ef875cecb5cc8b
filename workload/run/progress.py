"""Renders the workload's JSON-lines events (workload/run/events.py) as one readable line each: what `pulumi up`
shows while a phase runs. Beside the event format, so the two change together."""

from __future__ import annotations

import json
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
    """Prints each event as a line and keeps the summary event (the job's last line) for the caller."""

    def __init__(self, out: TextIO, *, quiet: bool = False):
        self.out, self.quiet = out, quiet
        self.summary: dict[str, Any] | None = None

    def line(self, text: str) -> None:
        event = parse_event(text)
        if event is None:
            return  # it stays in the job's log on the host
        if event["event"] == "summary":
            self.summary = event
            return
        rendered = render(event)
        if rendered and not self.quiet:
            print(rendered, file=self.out, flush=True)


def render(e: dict[str, Any]) -> str | None:
    kind, phase = e["event"], e.get("phase", "?")
    if kind == "phase":
        status = e.get("status")
        if status == "start":
            return f"▶ {phase}"
        if status == "done":
            return f"✓ {phase} done in {e.get('seconds', 0):.0f} s"
        if status == "skipped":
            return f"· {phase} skipped: {e.get('reason', 'already done')}"
        if status == "failed":
            return f"✗ {phase} failed after {e.get('seconds', 0):.0f} s: {e.get('cause', '')}"
    if kind == "resume":
        data = f"; data {e['data']}" if e.get("data") else ""
        # The checkpoint as its directory is named: with MaxText's own loop, one less than the updates it holds.
        checkpoint = e.get("checkpoint", e.get("from_step"))
        return f"↻ {phase} resumes from checkpoint {checkpoint} in {e.get('checkpoints', '?')}{data}"
    if kind == "step":
        parts = [f"{phase} step {e.get('step')}/{e.get('steps')}"]
        if e.get("loss") is not None:
            parts.append(f"loss {e['loss']:.4f}")
        if e.get("step_seconds") is not None:
            parts.append(f"{e['step_seconds']:.2f} s/step")
        if e.get("tokens_per_s_per_device") is not None:
            parts.append(f"{e['tokens_per_s_per_device']:.0f} tokens/s/device")
        if e.get("tflops_per_device") is not None:
            parts.append(f"{_tflops(e['tflops_per_device'])} TFLOP/s/device")
        if e.get("mfu") is not None:
            parts.append(f"MFU {e['mfu']:.1%}")
        if e.get("eval_step") is not None:
            parts.append(f"held-out loss {_loss(e.get('eval_loss'))} at step {e['eval_step']}")
        if e.get("eta_s") is not None:
            parts.append(f"ETA {duration(e['eta_s'])}")
        if e.get("cost_usd") is not None:
            parts.append(f"${e['cost_usd']:.2f} so far")
        return " · ".join(parts)
    if kind == "eval":
        return f"{phase} held-out loss at step {e.get('step')}: {_loss(e.get('eval_loss'))}"
    if kind == "error":
        tail = "\n".join(f"    {line}" for line in e.get("tail", [])[-10:])
        return f"✗ {phase}: {e.get('cause')}" + (f"\n  log tail ({e.get('log')}):\n{tail}" if tail else "")
    return None


def _loss(value: float | None) -> str:
    return "not finite" if value is None else f"{value:.4f}"


def _tflops(value: float) -> str:
    """Three significant figures: 0.0162 on a CPU, 412 on a TPU chip."""
    return f"{value:.0f}" if value >= 100 else f"{value:.3g}"
