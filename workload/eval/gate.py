"""The quality gate before publishing: does the kept model's eval report (`eval/report.json`, written by the eval
step) say the fine-tune is worse than its base beyond the margin on any task? Called wherever publishing runs
(`python -m workload.publish` on the VM today), before anything is sent.

`tpu-sft:evalGate` chooses what a finding does: `block` refuses to publish in one line (the task, both scores, the
report's path, and the fix), `warn` publishes and says the same as a warning, `off` publishes without reading the
report. The margin (`tpu-sft:evalMargin`, points) is the gate's: every comparison is judged again at it
(`TaskComparison.at_margin`), so changing it re-runs publishing, never the eval.

A report that is missing or unreadable is a finding too: with `block` it refuses, since a report lost to a failure
must not pass silently. A user who chose no eval (`tpu-sft:evalTasks off`) sets the gate off with it; the preview
refuses `block` without an eval to read (infra/config/cross_key_rules.py).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any

from workload.eval.compare import TaskComparison, outcome, outcome_line

MODES = ("block", "warn", "off")
DEFAULT_MODE = "block"
DEFAULT_MARGIN_POINTS = 2.0
MARGIN_RANGE = (0.0, 100.0)  # points: a margin of 100 lets every score through, one above it means nothing more
REPORT = "eval/report.json"  # in the kept model's directory
WARN_FIX = "pulumi config set tpu-sft:evalGate warn, then pulumi up (nothing is trained again)"


@dataclass(frozen=True)
class Verdict:
    """What the gate found: the comparisons judged at its margin (none where it is off or the report is missing),
    and the finding in one line (None: nothing to say, publish)."""

    mode: str
    margin_points: float
    report: str  # where the report is, as the user knows the kept model (a gs:// URL for a bucket's)
    comparisons: tuple[TaskComparison, ...]
    finding: str | None

    @property
    def blocks(self) -> bool:
        return self.mode == "block" and self.finding is not None

    @property
    def line(self) -> str:
        """The one line the user reads: the refusal, the warning, or the scores that passed."""
        if self.mode == "off":
            return "eval gate off: published without reading the eval report"
        if self.finding is None:
            return f"eval gate passed ({self.margin_points:g}-point margin): {outcome_line(self.comparisons)}"
        if self.blocks:
            return f"not published: {self.finding}; to publish it anyway: {WARN_FIX}"
        return f"published with tpu-sft:evalGate warn, although {self.finding}"

    @property
    def public_line(self) -> str:
        """What a published model card may say of the gate: no path (a bucket's name is not published)."""
        if self.mode == "off":
            return "not applied (tpu-sft:evalGate off)"
        worse = [c.label for c in self.comparisons if c.worse]
        if self.finding is None:
            return f"passed: no benchmark worse than the base's by more than the {self.margin_points:g}-point margin"
        if worse:
            return (
                f"published with tpu-sft:evalGate warn, although worse than the base beyond the "
                f"{self.margin_points:g}-point margin on {', '.join(worse)}"
            )
        return "published with tpu-sft:evalGate warn, without an eval to judge"

    def to_json(self) -> dict[str, Any]:
        """The publish summary's `gate`: the mode, whether it found something and blocked, its line, the
        comparisons."""
        return {
            "mode": self.mode,
            "found": self.finding is not None,
            "margin_points": self.margin_points,
            "report": self.report,
            "blocked": self.blocks,
            "line": self.line,
            "tasks": [c.to_json() for c in self.comparisons],
        }


def read_report(path: str) -> dict[str, Any] | None:
    """The report as the eval step wrote it (`{"off": true}` where tpu-sft:evalTasks was off); None where there is
    none. Raises ValueError for one that is not a report (cut short, or another version's)."""
    try:
        with open(path, encoding="utf-8") as f:
            report = json.load(f)
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise ValueError(f"cannot be read ({type(error).__name__}: {error})".splitlines()[0]) from None
    if not isinstance(report, dict) or not (isinstance(report.get("tasks"), list) or report.get("off") is True):
        raise ValueError("is not an eval report (no list of tasks)")
    return report


def comparisons_of(report: dict[str, Any]) -> tuple[TaskComparison, ...]:
    return tuple(TaskComparison.from_json(task) for task in report["tasks"])


def verdict(report: dict[str, Any] | None, mode: str, margin_points: float, where: str) -> Verdict:
    """The gate's verdict on a report already read (None: there is none), `where` naming it."""
    if mode not in MODES:
        raise ValueError(f"the eval gate is {mode!r}: one of {', '.join(MODES)}")
    if not MARGIN_RANGE[0] <= margin_points <= MARGIN_RANGE[1]:
        raise ValueError(f"the eval margin is {margin_points:g} points: between {MARGIN_RANGE[0]:g} and 100")
    if mode == "off":
        return Verdict(mode, margin_points, where, (), None)
    if report is None:
        missing = f"the kept model has no eval report ({where}): its eval did not run or did not finish"
        return Verdict(mode, margin_points, where, (), f"{missing}; run `pulumi up` again to evaluate it")
    if report.get("off") is True:  # the eval step's record of tpu-sft:evalTasks off
        return Verdict(mode, margin_points, where, (), f"the eval was off (tpu-sft:evalTasks off; {where})")
    try:
        judged = tuple(c.at_margin(margin_points) for c in comparisons_of(report))
    except ValueError as error:
        return Verdict(mode, margin_points, where, (), f"the eval report {where} is not readable: {error}")
    if not judged:
        return Verdict(mode, margin_points, where, (), f"the eval report {where} compares no task")
    worse = [c for c in judged if c.worse]
    if not worse:
        return Verdict(mode, margin_points, where, judged, None)
    findings = " and ".join(outcome(c, judged=False) for c in worse)
    finding = (
        f"the fine-tuned model is worse than its base beyond the {margin_points:g}-point margin on {findings} "
        f"(report: {where})"
    )
    return Verdict(mode, margin_points, where, judged, finding)


def judge(model_dir: str, mode: str, margin_points: float, shown_dir: str | None = None) -> Verdict:
    """The gate on the model kept in `model_dir` (a local directory: a bucket's copy, once fetched), its report named
    under `shown_dir` (the kept location the user knows, e.g. the gs:// URL the copy came from)."""
    where = f"{(shown_dir or model_dir).rstrip('/')}/{REPORT}"
    if mode == "off":
        return verdict(None, mode, margin_points, where)
    try:
        report = read_report(os.path.join(model_dir, REPORT))
    except ValueError as error:
        return Verdict(mode, margin_points, where, (), f"the eval report {where} {error}")
    return verdict(report, mode, margin_points, where)
