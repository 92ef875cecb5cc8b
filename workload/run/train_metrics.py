"""The runner's training records (one line per parsed step, one per attempt) outlive the VM with the checkpoints:
they are appended locally while MaxText runs and copied beside the checkpoints (workload/run/storage.py) now and then
and after each attempt. A new VM that resumes the run starts from that copy, so its loss curve continues the one
the lost VM began instead of starting at the resumed step."""

from __future__ import annotations

import os
import time

from workload.run import storage
from workload.run.layout import Layout

PERSIST_EVERY_S = 30.0  # one small object rewrite per 30 s: far below Cloud Storage's one write/s per object


class Cadence:
    """When to copy the records: every PERSIST_EVERY_S, and at the two steps around each checkpoint (the step
    before it and its own), so a VM lost after checkpoint N loses at most step N's line — later steps are
    trained again anyway."""

    def __init__(self, checkpoint_period: int | None, every_s: float = PERSIST_EVERY_S):
        self.period, self.every_s, self.last = checkpoint_period, every_s, time.monotonic()

    def due(self, step: int) -> bool:
        now = time.monotonic()
        at_checkpoint = self.period is not None and (step + 1) % self.period in (0, 1)
        if not at_checkpoint and now - self.last < self.every_s:
            return False
        self.last = now
        return True


def _names(layout: Layout) -> dict[str, str]:
    return {os.path.basename(path): path for path in (layout.metrics_file, layout.attempts_file)}


def persist(layout: Layout) -> None:
    for name, local in _names(layout).items():
        if os.path.isfile(local):
            with open(local, encoding="utf-8") as f:
                storage.write_text(storage.join(layout.persisted_metrics_dir, name), f.read())


def restore(layout: Layout) -> bool:
    """On a host without local records (a new VM), take the persisted ones; True when it did."""
    if os.path.exists(layout.metrics_file):
        return False
    restored = False
    for name, local in _names(layout).items():
        text = storage.read_text(storage.join(layout.persisted_metrics_dir, name))
        if text is not None:
            os.makedirs(os.path.dirname(local), exist_ok=True)
            with open(local, "w", encoding="utf-8") as f:
                f.write(text)
            restored = True
    return restored
