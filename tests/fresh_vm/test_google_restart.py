"""The stand-in of Google's own restart of a TPU VM (rehearsal/fresh_vm/machine.py `FreshVm.restart`): the same boot
and data disks, an empty /dev/shm, a new boot id, the startup script run again; the resume it starts is shown by
tests/workload/run/test_boot_resume.py on the same job layout."""

from __future__ import annotations

from pathlib import Path

import pytest

from rehearsal.fresh_vm.address import claim_address
from rehearsal.fresh_vm.declared import DeclaredVm
from rehearsal.fresh_vm.disk import LoopDisk
from rehearsal.fresh_vm.image import cached_image
from rehearsal.fresh_vm.machine import FreshVm, Timeline

pytestmark = pytest.mark.root


def test_a_restart_keeps_both_disks_empties_dev_shm_and_runs_the_startup_script_in_a_new_boot(tmp_path):
    script = "#!/bin/sh\necho boot-$(cat /proc/sys/kernel/random/boot_id)\n"
    declared = DeclaredVm("vm-restart", "", script, "tpu-sft-data", 1)
    address, lock = claim_address()
    vm = FreshVm(
        declared, address, LoopDisk(tmp_path / "data.img", 1), tmp_path, tmp_path / "boot-disks", [], Timeline(0, 0)
    )
    try:
        vm.create(cached_image(lambda line: None))
        vm.wait_for("startup-script-exit", 60)
        root = lambda: Path(f"/proc/{vm.pid}/root")  # noqa: E731  the running boot's view
        (root() / "var/kept-on-boot-disk").write_text("kept")
        (root() / "dev/shm/lost").write_text("lost")
        boot_id = (root() / "proc/sys/kernel/random/boot_id").read_text().strip()
        assert vm.boots[0].first("startup-script-output", f"boot-{boot_id}") is not None
        vm.restart()
        vm.wait_for("startup-script-exit", 60)
        assert [b.number for b in vm.boots] == [1, 2]
        new_id = (root() / "proc/sys/kernel/random/boot_id").read_text().strip()
        assert new_id != boot_id and vm.boots[1].first("startup-script-output", f"boot-{new_id}") is not None
        assert (root() / "var/kept-on-boot-disk").read_text() == "kept"
        assert not (root() / "dev/shm/lost").exists()
    finally:
        vm.delete()
        vm.wait_discarded()
        lock.close()
