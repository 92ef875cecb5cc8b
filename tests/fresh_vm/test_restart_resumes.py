"""Google restarts the VM (rehearsal/fresh_vm/google_restart.py): mid-training, the VM's own start-up resumes the run
from the bucket's last checkpoint and finishes it, with nothing run from the laptop; after the finished run, a
restart starts nothing (docs/restarts.md)."""

from __future__ import annotations

from rehearsal.fresh_vm.rehearse import CHECKPOINT_PERIOD
from tests.fresh_vm.test_lost_vm import LOOP, STEPS


def test_google_restarted_the_vm_after_a_later_checkpoint_and_the_laptop_ran_nothing_after(fresh_vm):
    run = fresh_vm.run
    mid_run = run.restarts[0]
    assert run.lost_at_checkpoint < mid_run.at_checkpoint < LOOP.checkpoint_step(STEPS)
    assert mid_run.boot.number == 3 and mid_run.boot.disk_uuid_before == run.boots[0].disk_uuid_after
    # The VM the group made (boot 2) resumed alone and Google restarted it: no SSH session reached the restarted VM
    # until the run had ended there (the further `up` then did: the check is not vacuous).
    assert mid_run.ended_at is not None
    sessions = [t for t, event, detail in mid_run.boot.events() if event == "sshd" and "Accepted " in detail]
    assert sessions and all(t > mid_run.ended_at for t in sessions)


def test_the_start_up_began_the_next_attempt_and_it_resumed_from_that_checkpoint(fresh_vm):
    mid_run = fresh_vm.run.restarts[0]
    assert mid_run.jobs_before == ["run-1", "run-2"] and mid_run.attempt == "run-3"
    assert "run-2 died with its boot (no exit record, started in another boot): started run-3" in mid_run.startup_line
    assert "restored" not in mid_run.startup_line  # Google's restart keeps the boot disk
    budget = mid_run.first("boot_resume")
    assert budget is not None and budget["status"] == "resumed" and budget["of"] == "run-2"
    assert budget["checkpoint"] == mid_run.at_checkpoint
    resumed, first = mid_run.first("resume"), mid_run.first("step")
    assert resumed is not None and resumed["from_step"] == LOOP.updates(mid_run.at_checkpoint)
    assert first is not None and first["step"] == resumed["from_step"] + 1


def test_the_resumed_attempt_finished_the_run_and_kept_the_model(fresh_vm):
    run = fresh_vm.run
    mid_run = run.restarts[0]
    assert mid_run.exit_code == 0
    summary = mid_run.events[-1]
    assert summary["event"] == "summary" and summary["ok"] and summary["final_step"] == STEPS
    assert summary["kept_dir"].startswith("/mnt/tpu-sft-data/") and summary["kept_dir"] == run.summary["kept_dir"]


def test_the_steps_trained_again_are_at_most_the_checkpoint_period(fresh_vm):
    lost = fresh_vm.run.restarts[0].steps_lost(LOOP.updates)
    assert lost is not None and 0 <= lost <= CHECKPOINT_PERIOD  # its figure in the rehearsal's report


def test_a_restart_after_the_finished_run_starts_nothing(fresh_vm):
    after = fresh_vm.run.restarts[1]
    assert "nothing to resume: run-3 ended on its own (exit 0)" in after.startup_line
    assert after.attempt is None and after.jobs_after == after.jobs_before == ["run-1", "run-2", "run-3"]
