"""What a fresh-VM run shows about each first-boot hazard, read from its timestamped client output and the
VM's console: times are seconds after "VM created"."""

from __future__ import annotations

import subprocess
from dataclasses import dataclass

from rehearsal.fresh_vm import google_restart
from rehearsal.fresh_vm.rehearse import FreshVmRun, Line
from workload.core.config import PipelineConfig
from workload.core.trainer_loop import TRAINER_LOOPS


@dataclass(frozen=True)
class Attempt:
    at: float  # when the client reported the failed attempt (the attempt itself came just before)
    refused: str  # "connection" (nothing listening yet) or "auth" (the key was refused)


def failed_attempts(run: FreshVmRun) -> list[Attempt]:
    """Failed SSH attempts reported by `wait` (remote/ssh/wait.py) during the first `up`."""
    found = []
    for line in _first_boot(run):
        if "waiting for SSH on" in line.text:
            found.append(Attempt(line.at, "auth" if "refused key" in line.text else "connection"))
    return found


def _first_boot(run: FreshVmRun) -> list[Line]:
    return [line for line in run.lines if line.boot == 1]


def first_connected_at(run: FreshVmRun) -> float:
    return next(line.at for line in _first_boot(run) if "answered SSH after" in line.text)


def sshd_listening_at(run: FreshVmRun, boot: int = 0) -> float:
    return _required(run, boot, "sshd", "Server listening")


def user_created_at(run: FreshVmRun, boot: int = 0) -> float:
    return _required(run, boot, "user-created")


def _required(run: FreshVmRun, boot: int, event: str, contains: str = "") -> float:
    found = run.boots[boot].first(event, contains)
    if found is None:
        raise AssertionError(f"boot {boot + 1} never showed {event} {contains!r}; see {run.boots[boot].console}")
    return found[0]


def host_key_generated_at(run: FreshVmRun, boot: int = 0) -> float | None:
    found = run.boots[boot].first("host-keys-generated")
    return found[0] if found else None


def host_key_recorded_at(run: FreshVmRun) -> float | None:
    return next((line.at for line in _first_boot(run) if "recorded new host key" in line.text), None)


def sshd_refused_unknown_user_at(run: FreshVmRun, user: str) -> list[float]:
    return [t for t, e, d in run.boots[0].events() if e == "sshd" and f"invalid user {user}" in d.lower()]


def pinned_key_is_the_vms(run: FreshVmRun) -> bool:
    pinned = {tuple(line.split()[1:3]) for line in run.known_hosts.splitlines() if line.strip()}
    return bool(pinned) and pinned <= {tuple(key.split()[:2]) for key in run.host_public_keys}


def image_has_host_keys(run: FreshVmRun) -> bool:
    listing = subprocess.run(["tar", "-tf", str(run.image)], capture_output=True, text=True, check=True).stdout
    return "ssh_host_" in listing


def report(run: FreshVmRun, user: str) -> list[str]:
    t0 = run.vm_created_at
    attempts = failed_attempts(run)
    auth = [a for a in attempts if a.refused == "auth"]
    boot1, boot2 = run.boots[0], run.boots[-1]
    recorded = host_key_recorded_at(run)
    late_sshd = (
        f"late sshd: first SSH attempt failed at +{attempts[0].at - t0:.1f} s ({attempts[0].refused} "
        f"refused); sshd answered at +{sshd_listening_at(run) - t0:.1f} s"
        if attempts
        else "late sshd: NOT MET (no failed attempt)"
    )
    lines = [
        late_sshd,
        f"late user: {len(auth)} attempt(s) refused by sshd before the guest agent made {user} at "
        f"+{user_created_at(run) - t0:.1f} s; connected at +{first_connected_at(run) - t0:.1f} s",
        f"host key: made at first boot (+{(host_key_generated_at(run) or t0) - t0:.1f} s; the image has none: "
        f"{not image_has_host_keys(run)}); the client pinned the VM's own key: {pinned_key_is_the_vms(run)}"
        + (
            f"; it recorded it at +{recorded - t0:.1f} s, {'BEFORE' if recorded < user_created_at(run) else 'after'} "
            "authentication could succeed"
            if recorded
            else ""
        ),
        f"data disk: boot 1 found {boot1.disk_uuid_before or 'no filesystem'} and left {boot1.disk_uuid_after}; "
        f"boot {boot2.number} found {boot2.disk_uuid_before} and left {boot2.disk_uuid_after}; "
        f"the kept model after recreate: {len(run.kept_after_recreate)} entries",
        f"preempted VM: after checkpoint {run.lost_at_checkpoint} reached the bucket; the VM its group recreated "
        f"resumed alone, its training began at step {first_resumed_step(run)}",
    ]
    if run.first_train_step_at:
        lines.append(f"VM created → first training step: {run.first_train_step_at - t0:.0f} s")
    firsts = first_step_seconds(run)
    if len(firsts) >= 2:
        lost, resumed, *restarted = firsts.values()
        lines.append(
            f"compile cache: the first training step took {lost:.1f} s on the preempted VM (compiled) and "
            f"{resumed:.1f} s on the recreated one (loaded from the bucket): ratio {resumed / lost:.2f}"
            + "".join(f"; {s:.1f} s after Google's restart" for s in restarted)
        )
    # The rehearsal stack's loop (rehearsal/Pulumi.rehearsal.yaml: the default).
    updates = TRAINER_LOOPS[PipelineConfig.trainer].updates
    lines += google_restart.report([r.boot for r in run.recreations], updates, "the group's recreation")
    lines += google_restart.report(run.restarts, updates)
    return lines


def first_step_seconds(run: FreshVmRun) -> dict[int, float]:
    """Each attempt's first training step as MaxText timed it, by attempt: XLA compiles the step inside it, or
    loads it from the compile cache (<runs>/jax-cache). Same program and shapes on both VMs; the second's first
    step is a resumed one."""
    firsts: dict[int, float] = {}
    for record in sorted(run.kept_train_steps, key=lambda r: r["step"]):
        if record.get("step_seconds") is not None:
            firsts.setdefault(record["attempt"], record["step_seconds"])
    return firsts


def first_resumed_step(run: FreshVmRun) -> int | None:
    """The first training step of the attempt the recreated VM's start-up began (its `step` event)."""
    step = run.recreations[0].boot.first("step") if run.recreations else None
    return step["step"] if step else None
