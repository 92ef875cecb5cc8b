"""A phase's outcome in one line, read from its JSON summary (workload/run/pipeline.py; bootstrap's,
remote/pipeline/phase.py): what `pulumi up` still shows when it ends. pulumi-command shows a task's output only as
status messages, which the progress display drops at the end, so the program exports these lines (the stack output
`phases`, infra/outputs.py) and the phase task prints its own last (remote/pipeline/part.py).

A run that had finished before (a new VM on the data disk that keeps its model, with the same settings:
workload/run/pipeline.py `_reuse_kept`) ran no step, so its phases get one line between them, under the run task's
name, instead of three that would read as work done again; the eval phase, which runs on that model, keeps its
own line."""

from __future__ import annotations

from typing import Any

from workload.core.contract import PHASE_UNTIL, RUN_TASK
from workload.eval.compare import TaskComparison
from workload.eval.compare import outcome_line as eval_line

# The phases whose part a model kept before stands for (the eval phase runs after it, on it).
KEPT_PHASES = tuple(phase for phase, until in PHASE_UNTIL.items() if until != "eval")


def outcome_line(phase: str, summary: dict[str, Any]) -> str | None:
    """`phase`'s line: ✓ (⚠ for an eval that found the fine-tune worse) and what it found, or ✗ and why; None before
    the phase has run (a preview)."""
    if not summary:
        return None
    if not summary.get("ok"):
        where = f" at {summary['failed_step']}" if summary.get("failed_step") else ""
        return f"✗ {phase} failed{where}: {summary.get('error') or 'no reason given'}"
    if summary.get("reused_kept_model"):
        return f"✓ {phase}: {finished_before(summary)}"
    facts = _FACTS.get(phase, lambda s: [])(summary)
    return f"{_mark(phase, summary)} {phase}" + (": " + " · ".join(facts) if facts else "")


def _mark(phase: str, summary: dict[str, Any]) -> str:
    """✓, or ⚠ where the eval found the fine-tune worse than its base beyond the margin on a task: the phase
    succeeded, and publish's gate decides what follows, but the line must not read as all well."""
    tasks = (summary.get("eval") or {}).get("tasks") or [] if phase == "eval" else []
    return "⚠" if any(isinstance(task, dict) and task.get("worse") for task in tasks) else "✓"


def outcome_lines(summaries: dict[str, dict[str, Any]]) -> dict[str, str] | None:
    """Every phase's line that has one, by phase; the run's phases in one line where every one of them found the
    model the run had kept before; None before any has run."""
    lines = {phase: line for phase, summary in summaries.items() if (line := outcome_line(phase, summary))}
    run_phases = [summaries.get(phase) or {} for phase in KEPT_PHASES]
    if all(s.get("ok") and s.get("reused_kept_model") for s in run_phases):
        lines = {phase: line for phase, line in lines.items() if phase not in KEPT_PHASES}
        lines[RUN_TASK] = finished_before(run_phases[-1])
    return lines or None


def finished_before(summary: dict[str, Any]) -> str:
    """What a job that found the run's kept model did: nothing, and why (a manifest older than `kept_at` has no
    date)."""
    when = f", {summary['kept_at']}" if summary.get("kept_at") else ""
    return (
        f"run {summary.get('run_name')} finished before (model kept in {summary.get('kept_dir')}{when}): nothing to do"
    )


def _bootstrap(s: dict[str, Any]) -> list[str]:
    hosts = s.get("hosts") or {}
    installed = sum(state == "installed" for state in hosts.values())
    return [f"installed on {installed} of {len(hosts)} host(s)" if installed else f"already on {len(hosts)} host(s)"]


def _convert(s: dict[str, Any]) -> list[str]:
    return [f"checkpoint {s['checkpoint']}"] if s.get("checkpoint") else []


def _train(s: dict[str, Any]) -> list[str]:
    facts = []
    if "learned" in s:
        first, final = s.get("eval_loss_first"), s.get("eval_loss_final")
        verdict = {True: "it learned", False: "it did NOT learn", None: "one pass only"}[s["learned"]]
        facts.append(f"held-out loss {_loss(first)} → {_loss(final)} ({verdict})")
    if s.get("tokens_per_s") is not None:
        facts.append(f"{s['tokens_per_s']:,.0f} tokens/s")
    if s.get("mfu") is not None:
        facts.append(f"MFU {s['mfu']:.1%}")
    elif s.get("mfu_reason"):
        facts.append(f"no MFU ({s['mfu_reason']})")
    return facts


def _export(s: dict[str, Any]) -> list[str]:
    facts = []
    if s.get("kept_dir"):
        facts.append(f"model at {s['kept_dir']}")
    if s.get("verify") is not None:
        facts.append("verified" if (s["verify"] or {}).get("ok") else "verify FAILED")
    if s.get("bill"):
        facts.append(_bill(s["bill"]))
    return facts


def eval_facts(s: dict[str, Any]) -> list[str]:
    """The benchmarks' line (workload/eval/compare.py `outcome_line`), or why there is none."""
    found = s.get("eval") or {}
    if found.get("off"):
        return ["off (tpu-sft:evalTasks off)"]
    try:
        line = eval_line(TaskComparison.from_json(task) for task in found.get("tasks") or [])
    except ValueError as error:
        return [f"report unreadable ({error})"]
    where = " (the kept results)" if found.get("kept") else ""
    cached = " · base model's scores from the cache" if found.get("base_cached") else ""
    return [line + where + cached] if line else []


def _bill(bill: dict[str, Any]) -> str:
    """The VM's (or slice's) chip-hours since boot at the end of export, and their cost where the price was known
    (workload/spend/bill.py; its own line, with the uptime, is in the task's whole log)."""
    cost = f" ≈ ${bill['cost_usd']:.2f}" if bill.get("cost_usd") is not None else ""
    return f"bill {bill['chip_hours']:g} chip-hours{cost}"


_FACTS = {"bootstrap": _bootstrap, "convert": _convert, "train": _train, "export": _export, "eval": eval_facts}


def _loss(value: float | None) -> str:
    return "not finite" if value is None else f"{value:.3f}"
