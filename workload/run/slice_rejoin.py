"""Slices: every host resumes the same attempt at boot, or none does (docs/restarts.md).

Google restarts a slice's hosts together ("Failure recovery of TPU instances": a multi-host slice "require[s] all
instances in the slice to be recovered or rescheduled together"), and each host's start-up begins the next attempt
of the run on its own (workload/run/boot_resume.py). Before any step, those attempts meet in the bucket, under
`<run dir>/boot-resume/<the attempt that died>/`:

- every worker but 0 writes its check-in (`worker-<id>.json`: its boot id, and when it stops waiting), then waits
  for worker 0's decision (`decision.json`) and follows it;
- worker 0 (tpu-env's worker id, as the phases number the hosts) waits until every other worker has checked in,
  asks the budget (workload/run/resume_budget.py), and writes the decision, which names each worker's boot id.

So that no host trains unless all do: worker 0 decides to resume only while every check-in still counts, which ends
MARGIN_S before its worker gives up, and a worker gives up only after a last look at the decision: a decision
written in time is always seen. A check-in that no longer counts (a worker that gave up, or one of an earlier slice
on the same run, whose attempt numbers a recreated slice repeats) is not waited for, and a worker follows only a
decision that names its own boot. A worker that gives up, a worker 0 that misses a check-in, or the budget's refusal
ends every attempt that started before any step, with a `boot_resume` event giving the reason and an exit record, so
no boot restarts it; autostop's all-hosts rule then ends the idle slice as it does today.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from workload.run import resume_budget, storage
from workload.run.boot_resume import BOOT_ID
from workload.run.resume_budget import BootResume
from workload.run.steps import Context

PREFIX = "boot-resume"
DECISION = "decision.json"
# How long worker 0 waits for the others to check in. Google restarts a slice's hosts together, so their start-ups
# run within the spread of their boots, minutes at most; a host later than this is one that is not coming back, and
# every minute of the wait bills every host of the slice.
WAIT_S = 600.0
# Worker 0 decides this long before any waiting worker gives up: the decision's write, and the hosts' clocks (which
# Compute Engine keeps in step with its metadata server's NTP), are well inside it. A shorter wait (the rehearsal's)
# takes a quarter of itself.
MARGIN_S = 60.0
POLL_S = 5.0  # one read of a small object each time, per host


@dataclass(frozen=True)
class Clock:
    now: Callable[[], float] = time.time
    sleep: Callable[[float], None] = time.sleep
    poll_s: float = POLL_S


@dataclass(frozen=True)
class CheckIn:
    worker: int
    boot_id: str
    counts_until: float  # MARGIN_S before this worker stops waiting for the decision


@dataclass
class Rejoin:
    """Where one boot-resume of a slice meets: the run's `boot-resume/<attempt that died>/` prefix."""

    ctx: Context
    resume: BootResume
    boot_id: str
    clock: Clock = field(default_factory=Clock)

    @property
    def wait_s(self) -> float:
        return WAIT_S if self.resume.wait_s is None else self.resume.wait_s

    @property
    def margin_s(self) -> float:
        return min(MARGIN_S, self.wait_s / 4)

    def url(self, name: str) -> str:
        return storage.join(self.ctx.layout.run_dir, PREFIX, self.resume.of, name)

    def others(self) -> list[int]:
        return list(range(1, self.ctx.worker.count))

    def check_ins(self) -> dict[int, CheckIn]:
        """The other workers' check-ins that still count now."""
        now, found = self.clock.now(), {}
        for worker in self.others():
            raw = storage.read_text(self.url(f"worker-{worker}.json"))
            if raw is None:
                continue
            record = json.loads(raw)
            check_in = CheckIn(worker, str(record["boot_id"]), float(record["counts_until"]))
            if now < check_in.counts_until:
                found[worker] = check_in
        return found

    def check_in(self) -> float:
        """This worker's check-in, which counts for twice the wait (worker 0 may start up to a wait after this one,
        then wait a wait); returns when this worker stops waiting for the decision."""
        counts_until = self.clock.now() + 2 * self.wait_s
        record = {"worker": self.ctx.worker.id, "boot_id": self.boot_id, "counts_until": counts_until}
        storage.write_text(self.url(f"worker-{self.ctx.worker.id}.json"), json.dumps(record))
        return counts_until + self.margin_s

    def decision(self) -> dict[str, Any] | None:
        raw = storage.read_text(self.url(DECISION))
        record = None if raw is None else json.loads(raw)
        mine = record is not None and record.get("boots", {}).get(str(self.ctx.worker.id)) == self.boot_id
        return record if mine else None


def refusal(ctx: Context, resume: BootResume, boot_id: str | None = None, clock: Clock | None = None) -> str | None:
    """Why this boot-resumed attempt may not run (None: it may). One host: the budget alone. A slice: the rendezvous
    above, which can wait up to twice `resume.wait_s` (WAIT_S by default) on a worker other than 0."""
    if not ctx.worker.multi_host or ctx.layout.runs_dir is None:
        return resume_budget.refusal(ctx, resume)
    rejoin = Rejoin(ctx, resume, _this_boot() if boot_id is None else boot_id, clock or Clock())
    return _lead(rejoin) if ctx.worker.leader else _follow(rejoin)


def _lead(rejoin: Rejoin) -> str | None:
    """Worker 0: wait for every check-in, then decide, for every worker."""
    clock, resume = rejoin.clock, rejoin.resume
    give_up = clock.now() + rejoin.wait_s
    while len(found := rejoin.check_ins()) < len(rejoin.others()) and clock.now() < give_up:
        clock.sleep(clock.poll_s)
    facts: dict[str, Any] = {"of": resume.of}
    why = _missing(rejoin, found, f"within {rejoin.wait_s:g} s of worker 0's boot-resume")
    if why is not None:
        rejoin.ctx.events.emit("boot_resume", status="refused", **facts, reason=why)
    else:
        why, facts = resume_budget.verdict(rejoin.ctx, resume)  # logs its own resume or refusal
        if why is None:  # the budget's read and write took time: every worker must still be waiting
            why = _missing(rejoin, rejoin.check_ins(), "in time: its wait for worker 0 ended")
            if why is not None:
                rejoin.ctx.events.emit("boot_resume", status="refused", **facts, reason=why)
    boots = {str(worker): c.boot_id for worker, c in found.items()}
    decided = {"of": resume.of, "resume": why is None, "reason": why, "facts": facts, "boots": boots}
    storage.write_text(rejoin.url(DECISION), json.dumps(decided))
    return why


def _missing(rejoin: Rejoin, found: dict[int, CheckIn], when: str) -> str | None:
    missing = [w for w in rejoin.others() if w not in found]
    if not missing:
        return None
    who = ("worker " if len(missing) == 1 else "workers ") + ", ".join(map(str, missing))
    return (
        f"{who} of the slice did not rejoin {rejoin.resume.of}'s resume {when}: a slice resumes on all its hosts or "
        "none; `pulumi up` starts the run again"
    )


def _follow(rejoin: Rejoin) -> str | None:
    """A worker other than 0: check in, wait for worker 0's decision, follow it."""
    clock, resume, ctx = rejoin.clock, rejoin.resume, rejoin.ctx
    started, until = clock.now(), rejoin.check_in()
    while True:
        now = clock.now()  # before the read: a decision written before this moment is in what it reads
        decided = rejoin.decision()
        if decided is not None or now >= until:
            break
        clock.sleep(clock.poll_s)
    if decided is None:
        why = (
            f"worker 0 decided nothing on {resume.of}'s resume within {until - started:g} s: a slice resumes on "
            "all its hosts or none; `pulumi up` starts the run again"
        )
        ctx.events.emit("boot_resume", status="refused", of=resume.of, reason=why)
        return why
    facts = {**decided["facts"], "of": resume.of}
    if decided["resume"]:
        reason = f"{resume.of} died with its boot; worker 0 resumes it on every worker"
        ctx.events.emit("boot_resume", status="resumed", **facts, reason=reason)
        return None
    why = f"worker 0: {decided['reason']}"
    ctx.events.emit("boot_resume", status="refused", **facts, reason=why)
    return why


def _this_boot() -> str:
    with open(BOOT_ID, encoding="utf-8") as f:
        return f.read().strip()
