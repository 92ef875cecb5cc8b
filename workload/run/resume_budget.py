"""The boot-resume budget: a crash that is not the VM's must not bill forever.

An attempt that the VM's start-up began because the last one died with its boot (workload/run/boot_resume.py) first
asks here whether it may run: at most `limit` boot-resumes (tpu-sft:bootResumes) without a newer checkpoint in
between, and none after the deadline, `deadline_hours` after the run's first boot-resume. Both are kept in the
bucket beside the run's checkpoints (`<run dir>/boot-resumes.json`), where a VM that is deleted and made again cannot
lose them. Every resume and every refusal is a `boot_resume` event in the run's log, which the log mirror copies
there too and `tpu-sft status` reads (workload/run/run_state.py); a refusal ends the attempt before any step, with
an exit record, so no later boot restarts it, and autostop finds the VM idle.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from typing import Any

from workload.core.trainer_loop import TRAINER_LOOPS
from workload.run import storage
from workload.run.steps import Context, latest_checkpoint

RECORD = "boot-resumes.json"


@dataclass(frozen=True)
class BootResume:
    """What the start-up passed to the attempt it began."""

    of: str  # the attempt that died with its boot
    limit: int
    deadline_hours: float
    wait_s: float | None = None  # on a slice, how long its hosts wait for each other (None: slice_rejoin.WAIT_S)


@dataclass(frozen=True)
class Decision:
    record: dict[str, Any]  # the bucket's record after this boot-resume (unchanged on a refusal)
    since_checkpoint: int  # boot-resumes without a newer checkpoint, this one included where it runs
    refusal: str | None  # None: resume


def decide(record: dict[str, Any] | None, checkpoint: int | None, now: float, resume: BootResume) -> Decision:
    """The budget's verdict on one boot-resume, from the bucket's record and the run's last checkpoint (None: none)."""
    record = dict(record or {})
    resumes = list(record.get("resumes", []))
    deadline = float(record.get("deadline", now + resume.deadline_hours * 3600))
    since = sum(1 for r in resumes if r.get("checkpoint") == checkpoint)
    at = "checkpoint " + str(checkpoint) if checkpoint is not None else "no checkpoint"
    if since >= resume.limit:
        return Decision(
            record,
            since,
            f"{since} boot-resumes at {at} without a newer checkpoint, the most tpu-sft:bootResumes "
            f"({resume.limit}) allows: the run dies at every start; read its log, then `pulumi up` starts it again",
        )
    if now >= deadline:
        return Decision(
            record,
            since,
            f"past the boot-resume deadline ({time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(deadline))}, "
            f"{resume.deadline_hours:g} h after the run's first boot-resume): `pulumi up` starts it again",
        )
    resumes.append({"of": resume.of, "at": round(now, 3), "checkpoint": checkpoint})
    return Decision({"deadline": deadline, "resumes": resumes}, since + 1, None)


def refusal(ctx: Context, resume: BootResume, now: float | None = None) -> str | None:
    """Why this boot-resumed attempt may not run (None: it may): the bucket's record read, decided, written back,
    and logged."""
    return verdict(ctx, resume, now)[0]


def verdict(ctx: Context, resume: BootResume, now: float | None = None) -> tuple[str | None, dict[str, Any]]:
    """`refusal`, with the facts its `boot_resume` event gave (a slice's other workers log the same:
    workload/run/slice_rejoin.py)."""
    layout = ctx.layout
    if layout.runs_dir is None:
        why = "the run keeps no checkpoints outside the VM (no runs dir): nothing to resume from"
        ctx.events.emit("boot_resume", status="refused", of=resume.of, reason=why)
        return why, {"of": resume.of}
    url = storage.join(layout.run_dir, RECORD)
    raw = storage.read_text(url)
    # The checkpoint's own number, as the resume line names it (`↻ train resumes from checkpoint N`), not the updates
    # it holds: they differ by the loop's `updates_after` (workload/core/trainer_loop.py).
    loop = TRAINER_LOOPS[ctx.config.trainer]
    updates = latest_checkpoint(layout, loop)
    checkpoint = None if updates is None else loop.checkpoint_step(updates)
    decision = decide(json.loads(raw) if raw else None, checkpoint, time.time() if now is None else now, resume)
    facts = {"of": resume.of, "checkpoint": checkpoint, "since_checkpoint": decision.since_checkpoint}
    facts["limit"] = resume.limit
    if decision.refusal is not None:
        ctx.events.emit("boot_resume", status="refused", **facts, reason=decision.refusal)
        return decision.refusal, facts
    storage.write_text(url, json.dumps(decision.record))
    reason = f"{resume.of} died with its boot"
    ctx.events.emit("boot_resume", status="resumed", **facts, reason=reason)
    return None, facts
