"""A finished run stays finished: once the run has kept its model, the VM is deleted and made again on the same data
disk (autostop's normal case after a finished run), and the next `pulumi up` runs every command on the new VM (a new
instance id). With the same settings it redoes nothing, and the kept model's bytes stay as they were."""

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


def test_pulumi_up_ends_with_one_line_saying_the_run_finished_before(fresh_vm):
    """The stack output `phases`, what `pulumi up` leaves on screen of the tasks (infra/outputs.py), from the
    summaries the phase tasks printed last: bootstrap's install on the new boot disk, and the run in one line."""
    run = fresh_vm.run
    summaries = {done.name.rsplit("-", 1)[1]: last_json_line(done.stdout) for done in run.after_finished_up}
    phases = outcome_lines({task: summary for task, summary in summaries.items() if task in PHASES})
    kept = run.kept_manifest
    assert kept.get("kept_at"), "the kept model's manifest records when it was kept"
    assert phases == {
        "bootstrap": "✓ bootstrap: installed on 1 of 1 host(s)",
        "run": f"run {kept['run_name']} finished before (model kept in {run.summary['kept_dir']}, {kept['kept_at']}): "
        "nothing to do",
        "eval": "✓ eval: off (tpu-sft:evalTasks off)",  # the eval, not the kept model's, has its own line
    }
