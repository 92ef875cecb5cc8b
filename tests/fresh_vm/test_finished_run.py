"""A finished run stays finished: once the run has kept its model, Google preempts the VM and its group makes it again
on the same data disk, and the next `pulumi up` runs every command on the new VM (a new instance id). With the same
settings it redoes nothing, and the kept model's bytes stay as they were."""

from __future__ import annotations

import json

from infra.resources.tasks import last_json_line
from workload.core.contract import PHASES
from workload.run.phase_outcome import outcome_lines


def test_a_new_vm_after_a_finished_run_redoes_nothing(fresh_vm):
    run = fresh_vm.run
    assert [c.name for c in run.after_finished_up] == [c.name for c in run.second_up]  # every command ran again
    for done in run.after_finished_up:
        assert done.returncode == 0, f"{done.name}:\n{done.stdout}\n{done.stderr[-3000:]}"
        assert "▶" not in done.stdout, f"{done.name} ran a step again:\n{done.stdout}"
        assert json.loads(done.stdout.splitlines()[-1])["ok"]


def test_the_kept_model_s_bytes_are_unchanged(fresh_vm):
    run = fresh_vm.run
    assert any(e["path"] == "hf-model/model.safetensors" for e in run.kept_before)
    assert run.kept_after == run.kept_before


def test_pulumi_up_on_the_vm_the_group_made_finds_each_phase_done_by_the_attempt_that_ran_it(fresh_vm):
    """The stack output `phases`, what `pulumi up` leaves on screen of the tasks (infra/outputs.py), from the
    summaries the phase tasks printed last: bootstrap's install on the new boot disk, and each phase done by run-3, the
    attempt that finished the run, whose records the VM's start-up restored from the data disk (a plain new VM, with no
    records, says the run finished before in one line instead: tests/workload/run/test_phase_outcome.py)."""
    run = fresh_vm.run
    summaries = {done.name.rsplit("-", 1)[1]: last_json_line(done.stdout) for done in run.after_finished_up}
    phases = outcome_lines({task: summary for task, summary in summaries.items() if task in PHASES})
    assert phases["bootstrap"] == "✓ bootstrap: installed on 1 of 1 host(s)"
    assert set(phases) == set(PHASES) and all(line.startswith("✓ ") for line in phases.values())
    assert phases["export"] == f"✓ export: model at {run.summary['kept_dir']} · verified"
    assert phases["eval"] == "✓ eval: off (tpu-sft:evalTasks off)"
