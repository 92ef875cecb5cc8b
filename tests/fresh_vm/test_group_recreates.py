"""Google preempts the Spot VM mid-training and its group recreates it (rehearsal/fresh_vm/group_repair.py, the group
stand-in rehearsal/managed_group.py over what the program declared): the same name, a new boot disk, the data disk
kept. The new boot's start-up alone restores what the tasks kept on the data disk and resumes the run from the bucket's
last checkpoint, with no `pulumi up` and no SSH from the laptop; the run finishes without them (after Google's restart,
tests/fresh_vm/test_restart_resumes.py). A second preemption after keep starts nothing (docs/restarts.md)."""

from __future__ import annotations

from rehearsal.fresh_vm.rehearse import CHECKPOINT_PERIOD
from tests.fresh_vm.test_lost_vm import LOOP, STEPS
from workload.core.contract import RESUME_KIT_DIR

NAME = "tpu-sft-rehearsal-01"  # the group's VM: <instanceName>-01, before and after every repair


def accepted_sessions(boot) -> list[float]:
    return [t for t, event, detail in boot.events() if event == "sshd" and "Accepted " in detail]


def test_the_group_recreated_the_preempted_vm_under_its_name_with_a_new_boot_disk_and_the_data_disk(fresh_vm):
    run = fresh_vm.run
    preempted = run.recreations[0]
    assert preempted.lost.name == preempted.made.name == NAME
    assert preempted.made.instance_id != preempted.lost.instance_id
    assert preempted.made.boot_disk != preempted.lost.boot_disk
    assert preempted.made.disks == preempted.lost.disks and len(preempted.made.disks) == 1
    # Mid-training: after a checkpoint and before the last; the same filesystem on the data disk, mounted, not made.
    assert CHECKPOINT_PERIOD <= run.lost_at_checkpoint < LOOP.checkpoint_step(STEPS)
    boot = preempted.boot.boot
    assert boot.number == 2 and boot.disk_uuid_before == run.boots[0].disk_uuid_after


def test_its_start_up_alone_restored_the_run_and_resumed_it_from_the_buckets_last_checkpoint(fresh_vm):
    run = fresh_vm.run
    resumed = run.recreations[0].boot
    assert f"a new boot disk: restored jobs, runs, code, secrets from {RESUME_KIT_DIR}" in resumed.startup_line
    assert "run-1 died with its boot (no exit record, started in another boot): started run-2" in resumed.startup_line
    assert resumed.jobs_before == ["run-1"] and resumed.attempt == "run-2"
    # Under the run's budget: a recreation is a boot, and the run counted it.
    budget = resumed.first("boot_resume")
    assert budget is not None and budget["status"] == "resumed" and budget["of"] == "run-1"
    assert budget["checkpoint"] == run.lost_at_checkpoint == resumed.at_checkpoint
    step = resumed.first("step")
    assert step is not None and step["step"] == LOOP.updates(run.lost_at_checkpoint) + 1


def test_nothing_from_the_laptop_reached_the_recreated_vm_until_the_run_had_finished(fresh_vm):
    run = fresh_vm.run
    recreated, restarted = run.recreations[0].boot.boot, run.restarts[0]
    assert accepted_sessions(recreated) == []  # the whole boot: its start-up's attempt, then Google's restart
    assert restarted.exit_code == 0 and restarted.events[-1]["final_step"] == STEPS
    assert all(t > restarted.ended_at for t in accepted_sessions(restarted.boot))


def test_a_second_preemption_after_keep_starts_nothing_and_installs_nothing(fresh_vm):
    run = fresh_vm.run
    after = run.recreations[1]
    assert after.made.name == NAME and after.made.instance_id != after.lost.instance_id
    line = after.boot.startup_line
    assert "a new boot disk: restored" in line and "nothing to resume: run-3 ended on its own (exit 0)" in line
    assert after.boot.attempt is None and after.boot.jobs_after == after.boot.jobs_before == ["run-1", "run-2", "run-3"]
    # Nothing installed at boot: the next `pulumi up`'s bootstrap found the new boot disk empty and installed it.
    assert "installed apt, uv, python, venv, maxtext" in run.after_finished_up[0].stdout
