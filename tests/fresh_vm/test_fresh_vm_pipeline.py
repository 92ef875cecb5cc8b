"""The whole tiny pipeline on the new VM: bootstrap installs from nothing, a second `up` does nothing, and the
rehearsal leaves no VM, mount or loop device behind."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from rehearsal.fresh_vm.substitutions import PLATFORM


def test_bootstrap_installs_everything_on_the_new_vm(fresh_vm):
    bootstrap = fresh_vm.run.first_up[0]
    assert bootstrap.name.endswith("-bootstrap")
    assert "installed apt, uv, python, venv, maxtext" in bootstrap.stdout


def test_the_pipeline_trains_exports_verifies_and_keeps_the_model(fresh_vm):
    summary = fresh_vm.run.summary
    assert summary["ok"] and summary["final_step"] == 20
    assert summary["verify"]["ok"]


def test_a_second_up_finds_everything_done(fresh_vm):
    run = fresh_vm.run
    assert run.second_up_inputs_unchanged
    bootstrap, *phases = run.second_up
    assert json.loads(bootstrap.stdout.splitlines()[-1])["hosts"] == {run.address: "unchanged"}
    for phase in phases:
        assert "▶" not in phase.stdout, f"{phase.name} ran a step again:\n{phase.stdout}"
        assert json.loads(phase.stdout.splitlines()[-1])["ok"]


def test_every_substitution_is_printed_by_name(fresh_vm):
    for substitution in [*PLATFORM, *fresh_vm.run.substitutions]:
        assert f"substitution {substitution.name}:" in fresh_vm.output
    names = {s.name for s in fresh_vm.run.substitutions}
    assert {"uv-from-pypi", "python-from-host", "torch-from-pypi", "uv-cache"} <= names


def test_nothing_is_left_running_or_attached(fresh_vm):
    image = fresh_vm.directory / "data-disk.img"
    assert subprocess.run(["losetup", "-j", str(image)], capture_output=True, text=True).stdout == ""
    assert not (fresh_vm.directory / "boot-disks").exists()
    for boot in fresh_vm.run.boots:
        assert boot.init_pid and boot.deleted_at
        assert not _is_guest_init(boot.init_pid), f"boot {boot.number}'s PID 1 ({boot.init_pid}) is still running"


def _is_guest_init(pid: int) -> bool:
    try:
        return b"guest.py" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return False
