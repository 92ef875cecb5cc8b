"""Google preempts the fresh-VM rehearsal's Spot VM and its group recreates it (tpu-sft:recovery auto:
infra/resources/vm_group.py), with nobody at the laptop (docs/restarts.md, "After a recreation").

What comes back is the group stand-in's to say (rehearsal/managed_group.py, over what the program declared): the same
name, a new instance id and boot disk, the data disk it keeps. The simulated VM (machine.py) is then deleted, its boot
disk with it, and created again from the image on that data disk. What its start-up does is read from the VM, as after
Google's restart (google_restart.py):
- mid-training: it restores the kit the tasks kept on the data disk (remote/pipeline/resume_kit.py) and starts the
  run's next attempt, which installs what the boot disk lost and resumes from the bucket's last checkpoint;
- after the run has finished: it starts nothing, and installs nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from rehearsal.fresh_vm.google_restart import (
    BOOT_RESUME_LINE,
    STARTUP_WAIT_S,
    Restart,
    last_logged_step,
    run_attempts,
    seen,
)
from rehearsal.fresh_vm.machine import FreshVm
from rehearsal.managed_group import ManagedGroup, Vm


@dataclass
class Recreation:
    """One preemption of the group's VM: the VM the group lost, the one it made, and what the new boot did."""

    lost: Vm
    made: Vm
    boot: Restart


def preempt(
    vm: FreshVm,
    group: ManagedGroup,
    image: Path,
    user: str,
    checkpoint: Callable[[], int | None],
    gone: Callable[[], None] = lambda: None,
) -> Recreation:
    """Preempt the VM, let the group recreate it, and wait until the new boot's startup script has decided. `gone`
    runs once the old VM has ended (a command that followed the run over SSH ends there)."""
    name = vm.declared.name
    trained_to, before = last_logged_step(seen(vm)), run_attempts(seen(vm), user)
    lost = group.vms[name]
    group.preempt(name)
    made = group.vms.get(name)
    if made is None:
        raise RuntimeError(f"the group did not recreate {name} after its preemption")
    if made.boot_disk == lost.boot_disk or set(lost.disks) - set(made.disks):
        raise RuntimeError(f"the group's new {name} must have a new boot disk and the disks it keeps: {made}")
    vm.delete()
    gone()
    at = checkpoint()  # once the old VM's trainer is gone: the last checkpoint it made
    boot = vm.create(image)
    _, line = vm.wait_for("startup-script-output", STARTUP_WAIT_S, contains=BOOT_RESUME_LINE)
    vm.wait_for("startup-script-exit", STARTUP_WAIT_S)
    after = run_attempts(seen(vm), user)
    started = [a for a in after if a not in before]
    return Recreation(lost, made, Restart(boot, at, trained_to, line, before, after, started[-1] if started else None))
