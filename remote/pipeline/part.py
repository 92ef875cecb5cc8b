"""A phase's part of the run: the workload steps after the previous phase's last one, up to its own
(workload/core/contract.py PHASE_UNTIL). A phase task shows that part's progress lines and ends with its summary:
the one the run prints as the part's last step ends (`python -m workload run --phase-summaries`), or the run's
failure, whichever comes first. After its part the run goes on, and the task does not wait for it; after a failure
the run ends, and the task follows it to its exit code."""

from __future__ import annotations

import json
from typing import Any, TextIO

from remote.pipeline import outcome
from workload.core.contract import PHASE_UNTIL, RUN_STEPS
from workload.measure.learning import describe as describe_learning
from workload.run.phase_outcome import outcome_line
from workload.run.progress import ProgressPrinter
from workload.spend.bill import describe as describe_bill

# Events of no step of RUN_STEPS belong to the first part: the tiny profile's assets, and what fails before any step.
BEFORE_STEPS = ("assets", "setup")


class PartDone(Exception):
    """Raised from `PartPrinter.line` once the part's summary is in and says it succeeded: the caller stops
    following the run there."""


def part_steps(phase: str) -> tuple[str, ...]:
    phases = list(PHASE_UNTIL)
    at = phases.index(phase)
    first = 0 if at == 0 else RUN_STEPS.index(PHASE_UNTIL[phases[at - 1]]) + 1
    steps = RUN_STEPS[first : RUN_STEPS.index(PHASE_UNTIL[phase]) + 1]
    return (*BEFORE_STEPS, *steps) if at == 0 else steps


class PartPrinter(ProgressPrinter):
    """Prints the part's events as lines (none when `quiet`) and keeps its summary."""

    def __init__(self, phase: str, out: TextIO, *, quiet: bool = False):
        super().__init__(out, quiet=quiet)
        self.until, self.steps = PHASE_UNTIL[phase], part_steps(phase)

    def keep_summary(self, event: dict[str, Any]) -> None:
        if event.get("until") == self.until and event.get("ok"):
            self.summary = event
            raise PartDone
        if not event.get("ok"):  # the run failed: it ends now, and the caller reads how
            self.summary = event

    def shows(self, event: dict[str, Any]) -> bool:
        return event.get("phase") in self.steps


def end_with_summary(phase: str, summary: dict[str, Any] | None, missing: str, out: TextIO) -> None:
    """A phase task's last lines: the bill and whether training learned, where the summary says, then the summary
    as JSON (the stack outputs are read from it); with none, a failure that says why (`missing`)."""
    if summary and summary.get("bill"):
        print(describe_bill(summary["bill"]), file=out, flush=True)
    if phase == "eval":  # its own line: the benchmarks' (the summary carries the kept model's facts too)
        if summary and (line := outcome_line(phase, summary)):
            print(line, file=out, flush=True)
    elif summary and (learned := describe_learning(summary)):
        print(learned, file=out, flush=True)
    print(json.dumps(summary or outcome.failed(phase, missing)), file=out, flush=True)
