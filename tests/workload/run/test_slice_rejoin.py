"""A slice's boot-resumed attempts meet in the bucket before any step (workload/run/slice_rejoin.py): every worker
resumes the same attempt, or none does. The runs dir is a local directory here (the bucket on a slice, through the
same workload/run/storage.py); the waits that must run out run on a clock that moves only when the code sleeps."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from tests.workload.run.test_pipeline import fake_steps, make_context  # noqa: F401  (fake_steps: a fixture)
from workload.__main__ import boot_resume_of, parser
from workload.core.config import PipelineConfig
from workload.launch.jax_process import JaxProcess
from workload.run import boot_resume, pipeline, resume_budget, run_state, slice_rejoin
from workload.run.layout import Layout
from workload.run.resume_budget import BootResume
from workload.run.run_state import REFUSED_STEP
from workload.run.slice_rejoin import Clock

HOSTS = ("worker-0", "worker-1", "worker-2")
RESUME = BootResume("run-4", limit=3, deadline_hours=4, wait_s=60)


class StillClock:
    """Time that passes only when the code under test sleeps: a wait runs out at once, and exactly."""

    def __init__(self, start: float = 10_000.0):
        self.t = start

    def clock(self) -> Clock:
        return Clock(now=lambda: self.t, sleep=self.sleep, poll_s=5.0)

    def sleep(self, seconds: float) -> None:
        self.t += seconds


def worker(tmp_path: Path, worker_id: int, hosts: tuple[str, ...] = HOSTS):
    """Worker `worker_id`'s context: its own work dir, the slice's one runs dir."""
    config = PipelineConfig.from_mapping({"runName": "sliced"})
    ctx, out = make_context(tmp_path / f"host-{worker_id}", config)
    ctx.layout = Layout(ctx.layout.work_dir, ctx.layout.output_dir, config.model, "sliced", str(tmp_path / "runs"))
    ctx.worker = JaxProcess(worker_id, hosts)
    return ctx, out


def rendezvous_dir(tmp_path: Path) -> Path:
    return tmp_path / "runs" / PipelineConfig.model / "post-train" / "sliced" / slice_rejoin.PREFIX / RESUME.of


def events(out) -> list[dict]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


def boot_resumes(out) -> list[dict]:
    """The boot_resume events, without their times."""
    return [{k: v for k, v in e.items() if k != "t"} for e in events(out) if e["event"] == "boot_resume"]


def on_every_worker(tmp_path: Path, count: int, resume: BootResume = RESUME) -> tuple[list, list]:
    """Each worker's rendezvous at once, in a thread each, on the real clock, as a new boot (its own boot ids): what
    each returned, and its events."""
    contexts = [worker(tmp_path, w, HOSTS[:count]) for w in range(count)]
    said: list = [None] * count
    fast = Clock(poll_s=0.01)

    def meet(w: int) -> None:
        said[w] = slice_rejoin.refusal(contexts[w][0], resume, boot_id=f"{resume.of}-boot-{w}", clock=fast)

    threads = [threading.Thread(target=meet, args=(w,)) for w in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not any(thread.is_alive() for thread in threads), "a worker is still waiting"
    return said, [out for _, out in contexts]


def test_when_every_worker_checks_in_all_resume_the_same_attempt_and_the_budget_counts_it_once(tmp_path):
    said, outs = on_every_worker(tmp_path, 3)
    assert said == [None, None, None]
    assert [[e["status"] for e in boot_resumes(out)] for out in outs] == [["resumed"]] * 3
    follower = boot_resumes(outs[1])[0]
    assert follower["reason"] == "run-4 died with its boot; worker 0 resumes it on every worker"
    assert (follower["of"], follower["limit"], follower["since_checkpoint"]) == ("run-4", 3, 1)
    record = json.loads((rendezvous_dir(tmp_path).parent.parent / resume_budget.RECORD).read_text())
    assert [r["of"] for r in record["resumes"]] == ["run-4"]  # one slice, one boot-resume
    decision = json.loads((rendezvous_dir(tmp_path) / slice_rejoin.DECISION).read_text())
    assert decision["resume"] is True and decision["boots"] == {"1": "run-4-boot-1", "2": "run-4-boot-2"}


def rejoin(ctx, boot_id: str, clock: StillClock) -> slice_rejoin.Rejoin:
    return slice_rejoin.Rejoin(ctx, RESUME, boot_id, clock.clock())


def test_a_host_that_never_comes_back_means_worker_0_starts_nothing_and_says_which(tmp_path):
    still = StillClock()
    one, one_out = worker(tmp_path, 1)
    rejoin(one, "boot-1", still).check_in()  # worker 1 came back; worker 2 never does
    zero, out = worker(tmp_path, 0)
    why = slice_rejoin.refusal(zero, RESUME, boot_id="boot-0", clock=still.clock())
    assert why == (
        "worker 2 of the slice did not rejoin run-4's resume within 60 s of worker 0's boot-resume: a slice resumes "
        "on all its hosts or none; `pulumi up` starts the run again"
    )
    assert still.t == 10_060.0  # worker 0 waited the whole wait, no longer
    assert boot_resumes(out) == [{"event": "boot_resume", "status": "refused", "of": "run-4", "reason": why}]
    assert not (rendezvous_dir(tmp_path).parent.parent / resume_budget.RECORD).exists()  # the budget untouched
    # Worker 1, which came back, follows the refusal at once, with its reason.
    assert slice_rejoin.refusal(one, RESUME, boot_id="boot-1", clock=still.clock()) == f"worker 0: {why}"
    assert still.t == 10_060.0
    assert [e["status"] for e in boot_resumes(one_out)] == ["refused"]


def test_a_worker_0_that_never_comes_back_means_the_others_start_nothing(tmp_path):
    still = StillClock()
    one, out = worker(tmp_path, 1)
    why = slice_rejoin.refusal(one, RESUME, boot_id="boot-1", clock=still.clock())
    assert why is not None and why.startswith("worker 0 decided nothing on run-4's resume within 135 s: ")
    assert still.t >= 10_135.0  # twice the wait, and the margin: worker 0 may come back late and then wait
    assert boot_resumes(out) == [{"event": "boot_resume", "status": "refused", "of": "run-4", "reason": why}]


def test_a_worker_0_that_comes_back_after_the_others_gave_up_starts_nothing_either(tmp_path):
    """Worker 1 checked in and gave up waiting (its check-in no longer counts); worker 0, back later, must not
    train alone: JAX would wait for worker 1 for ever."""
    still = StillClock()
    one, _ = worker(tmp_path, 1, HOSTS[:2])
    assert slice_rejoin.refusal(one, RESUME, boot_id="boot-1", clock=still.clock()) is not None
    zero, _ = worker(tmp_path, 0, HOSTS[:2])
    why = slice_rejoin.refusal(zero, RESUME, boot_id="boot-0", clock=still.clock())
    assert why is not None and why.startswith("worker 1 of the slice did not rejoin run-4's resume")


def test_a_check_in_counts_for_twice_the_wait_after_it_was_written(tmp_path):
    still = StillClock()
    one, _ = worker(tmp_path, 1, HOSTS[:2])
    zero, _ = worker(tmp_path, 0, HOSTS[:2])
    rejoin(one, "boot-1", still).check_in()
    still.sleep(119)
    assert list(rejoin(zero, "boot-0", still).check_ins()) == [1]
    still.sleep(1)
    assert rejoin(zero, "boot-0", still).check_ins() == {}


def test_a_decision_naming_another_boot_is_not_followed(tmp_path):
    """An earlier slice on the same run (a recreated slice numbers its attempts again) left a decision for run-4's
    resume: it names that slice's boots, so worker 1 waits for this slice's worker 0 instead."""
    still = StillClock()
    one, _ = worker(tmp_path, 1, HOSTS[:2])
    stale = {"of": "run-4", "resume": True, "reason": None, "facts": {}, "boots": {"1": "an-older-boot"}}
    rendezvous_dir(tmp_path).mkdir(parents=True)
    (rendezvous_dir(tmp_path) / slice_rejoin.DECISION).write_text(json.dumps(stale))
    why = slice_rejoin.refusal(one, RESUME, boot_id="boot-1", clock=still.clock())
    assert why is not None and why.startswith("worker 0 decided nothing")


def test_the_budgets_refusal_is_every_workers(tmp_path):
    for n in (1, 2, 3):  # three boot-resumes at no checkpoint, each of the attempt the one before began: the limit
        said, outs = on_every_worker(tmp_path, 2, BootResume(f"run-{n}", 3, 4, 60))
        assert said == [None, None]
    said, outs = on_every_worker(tmp_path, 2, BootResume("run-4", 3, 4, 60))
    assert said[0] is not None and said[0].startswith("3 boot-resumes at no checkpoint without a newer checkpoint")
    assert said[1] == f"worker 0: {said[0]}"
    refused = boot_resumes(outs[1])[-1]
    assert (refused["status"], refused["since_checkpoint"], refused["limit"]) == ("refused", 3, 3)


def test_a_refused_worker_runs_no_step_and_its_status_says_why(tmp_path, fake_steps, monkeypatch):  # noqa: F811
    """The pipeline asks the rendezvous before any step, on every worker (not only worker 0, as the budget alone
    was asked), and ends the attempt as the budget's refusal does."""
    still = StillClock()
    one, out = worker(tmp_path, 1, HOSTS[:2])
    monkeypatch.setattr(slice_rejoin, "Clock", still.clock)  # worker 0 never comes back: the wait runs out at once
    assert pipeline.run(one, boot_resume=RESUME) == 1
    assert fake_steps == []
    summary = events(out)[-1]
    assert (summary["event"], summary["failed_step"]) == ("summary", REFUSED_STEP)
    line = run_state.read(out.getvalue().splitlines()).line()
    assert line.startswith("stopped: not resumed at boot: worker 0 decided nothing on run-4's resume")


def test_the_start_ups_flags_reach_the_rendezvous():
    """boot_resume.py appends the slice's wait (the rehearsal's shorter one) after the budget's flags."""
    flags = [boot_resume.RESUME_OF_FLAG, "run-4", boot_resume.RESUMES_FLAG, "3", boot_resume.DEADLINE_FLAG, "4"]
    args = parser().parse_args(["run", "--config", "c.json", "--output-dir", "o", *flags])
    assert boot_resume_of(args) == BootResume("run-4", 3, 4.0, None)  # the default: slice_rejoin.WAIT_S
    args = parser().parse_args(["run", "--config", "c.json", "--output-dir", "o", *flags, boot_resume.WAIT_FLAG, "20"])
    assert boot_resume_of(args) == BootResume("run-4", 3, 4.0, 20.0)
