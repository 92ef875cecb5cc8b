"""Where a run stands, read back from its event lines (workload/run/events.py): what `python -m remote.stack status`
says. Beside the event format and its renderer (progress.py), so the three change together."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable

from workload.run.phase_outcome import eval_facts
from workload.run.progress import parse_event, step_facts

REFUSED_STEP = "boot-resume"  # a boot-resume refused (workload/run/resume_budget.py): the summary's failed_step


@dataclass(frozen=True)
class RunState:
    step: str | None  # the step started last (None: none started yet)
    step_status: str | None  # start (running), done, skipped or failed
    training: dict[str, Any] | None  # the last training step event: step, steps, loss, eta_s, …
    summary: dict[str, Any] | None  # the run's last line, once it has ended (a part's, until the next step starts)
    boot_resume: dict[str, Any] | None = None  # the attempt's boot_resume event: the VM's start-up began it
    progress: dict[str, Any] | None = None  # the running step's last progress event (the eval step's)

    def line(self) -> str:
        """`_line`, with the boot-resume that began the attempt, if one did (workload/run/resume_budget.py)."""
        said = self._line()
        resume = self.boot_resume
        if resume is None or resume.get("status") != "resumed":
            return said
        at = f"checkpoint {resume['checkpoint']}" if resume.get("checkpoint") is not None else "no checkpoint"
        return (
            f"{said} · resumed at boot: {resume.get('reason')} "
            f"({resume.get('since_checkpoint')} of {resume.get('limit')} at {at})"
        )

    def _line(self) -> str:
        """One line: the step, and in training the step count, loss and ETA; the outcome once it has ended."""
        if self.summary is not None:
            if self.summary.get("failed_step") == REFUSED_STEP:
                return f"stopped: not resumed at boot: {self.summary.get('error')}"
            if self.summary.get("ok"):
                until = self.summary.get("until", "the last step")
                said = f"finished: every step up to {until} done" + _final(self.summary)
                return " · ".join([said, *(f"eval: {fact}" for fact in eval_facts(self.summary))])
            return f"failed in {self.summary.get('failed_step')}: {self.summary.get('error')}"
        if self.step is None:
            return "starting: no step has begun"
        if self.step_status != "start":
            return f"between steps: {self.step} {self.step_status}"
        parts = [f"{self.step} running"]
        if self.step == "train" and self.training is not None:
            t = self.training
            parts += [f"step {t.get('step')}/{t.get('steps')}", *step_facts(t, ("loss", "eta_s"))]
        if self.progress is not None and self.progress.get("phase") == self.step:
            parts.append(str(self.progress.get("message")))
        return " · ".join(parts)


def _final(summary: dict[str, Any]) -> str:
    facts = [f"step {summary['final_step']}"] if summary.get("final_step") is not None else []
    if summary.get("final_loss") is not None:
        facts.append(f"loss {summary['final_loss']:.4f}")
    if summary.get("kept_dir"):
        facts.append(f"model kept in {summary['kept_dir']}")
    return f" ({', '.join(facts)})" if facts else ""


def read(lines: Iterable[str]) -> RunState:
    step = status = None
    training = summary = resume = progress = None
    for text in lines:
        event = parse_event(text)
        if event is None:
            continue
        kind = event["event"]
        if kind == "phase":
            step, status = event.get("phase"), event.get("status")
            summary = None  # the summary of a phase task's part: the run goes on
        elif kind == "step":
            training = event
        elif kind == "summary":
            summary = event
        elif kind == "boot_resume":
            resume = event
        elif kind == "progress":
            progress = event
    return RunState(step, status, training, summary, resume, progress)
