"""What the fresh-VM rehearsal reads from a VM Google restarted (rehearsal/fresh_vm/google_restart.py), on a boot
disk laid out as the remote layer and the workload leave it: the run's attempts, the dead trainer's last step, and
the figures of its report (the root-tier run: tests/fresh_vm/test_restart_resumes.py)."""

from __future__ import annotations

from pathlib import Path

from rehearsal.fresh_vm import google_restart
from rehearsal.fresh_vm.google_restart import Restart
from rehearsal.fresh_vm.machine import Boot
from workload.core.contract import SCRATCH_DIR
from workload.core.trainer_loop import TRAINER_LOOPS

NATIVE = TRAINER_LOOPS["native"]


def test_the_runs_attempts_in_number_order_and_no_other_job(tmp_path):
    jobs = google_restart.jobs_dir(tmp_path, "tpu-sft")
    for name in ("run-10", "run-9", "bootstrap-maxtext", ".staging-run-11-ab12cd34", "run-1"):
        (jobs / name).mkdir(parents=True)
    assert google_restart.run_attempts(tmp_path, "tpu-sft") == ["run-1", "run-9", "run-10"]
    assert google_restart.run_attempts(tmp_path / "new-vm", "tpu-sft") == []


def test_the_dead_trainers_last_step_is_the_last_maxtext_logged_in_dev_shm(tmp_path):
    logs = tmp_path / SCRATCH_DIR.lstrip("/") / "logs"
    assert google_restart.last_logged_step(tmp_path) is None
    logs.mkdir(parents=True)
    (logs / "train-1.log").write_text(
        "$ python -m maxtext.train …\ncompleted step: 7, seconds: 0.9, loss: 5.1\ncompleted step: 8, seconds: 0.8\n"
    )
    (logs / "convert-1.log").write_text("completed step: 99\n")
    assert google_restart.last_logged_step(tmp_path) == 8


def restart(tmp_path: Path, events: list[dict], trained_to: int | None = 12) -> Restart:
    boot = Boot(3, 1000.0, tmp_path / "boot-3-console.log", "uuid")
    line = "tpu-sft boot-resume: run-1 died with its boot (no exit record, started in another boot): started run-2"
    return Restart(boot, 10, trained_to, line, ["run-1"], ["run-1", "run-2"], "run-2", 0, 1200.0, events)


def test_the_report_gives_boot_to_first_resumed_step_and_the_steps_trained_again(tmp_path):
    resumed = restart(
        tmp_path,
        [
            {"event": "boot_resume", "status": "resumed", "of": "run-1", "t": 1030.0},
            {"event": "resume", "phase": "train", "from_step": NATIVE.updates(10), "t": 1100.0},
            {"event": "step", "phase": "train", "step": NATIVE.updates(10) + 1, "t": 1142.4},
        ],
    )
    assert resumed.steps_lost(NATIVE.updates) == NATIVE.updates(12) - NATIVE.updates(10)
    head, figures = google_restart.report([resumed], NATIVE.updates)
    assert head == f"Google restart, boot 3: {resumed.startup_line}"
    assert "run-2 resumed from update" in figures and "at +142 s after the boot" in figures
    assert f"steps trained again: {NATIVE.updates(12) - NATIVE.updates(10)} " in figures


def test_a_restart_that_resumed_nothing_reports_its_line_only(tmp_path):
    nothing = restart(tmp_path, [], trained_to=None)
    assert nothing.steps_lost(NATIVE.updates) is None
    assert google_restart.report([nothing], NATIVE.updates) == [f"Google restart, boot 3: {nothing.startup_line}"]


def test_a_log_that_ends_short_of_the_checkpoint_trained_nothing_again(tmp_path):
    """MaxText writes a step's line after the next step, so the old boot may end with the checkpoint saved and its
    step's line not yet written (seen in a clean-clone suite: the log ended one step short)."""
    short = restart(
        tmp_path,
        [{"event": "resume", "phase": "train", "from_step": NATIVE.updates(10), "t": 1100.0}],
        trained_to=9,
    )
    assert short.steps_lost(NATIVE.updates) == 0
