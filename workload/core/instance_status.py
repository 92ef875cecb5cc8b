"""Compute Engine's statuses of an instance, sorted by what they mean for the run: one table, read by the program
(infra/resources/vm_status.py: whether `pulumi up` replaces the VM) and by `scripts/tpu-sft status`
(remote/stack/vm_state.py: which case it says). Why the line falls where it does: docs/checkpoints.md, "A stopped VM".

Google's words, read 2026-12 (docs.cloud.google.com):
- "Compute Engine instance lifecycle": a TPU instance starts in PENDING; "After you create, restart, or resume a
  compute instance, Compute Engine starts allocating resources for the compute instance and sets its state to
  PROVISIONING", then STAGING, then RUNNING; STOPPING "occurs after … A user requested the stop or delete … Compute
  Engine is stopping or deleting the instance for a programmed stop or deletion … The instance is stopping after an
  hardware failure occurred". The API's own list (Instance.status) adds PENDING_STOP ("gracefully shutting down"),
  DEPROVISIONING ("tear down tasks"), REPAIRING ("The instance is in repair"), STOPPED and TERMINATED ("The instance
  has stopped (either by explicit action or underlying failure)"), SUSPENDING, SUSPENDED.
- "Failure recovery of TPU instances": in managed capacity mode "Compute Engine automatically recovers TPU
  instances and slices by restarting them on healthy hardware"; for a single host this "is controlled by the
  automatic restart setting, which is enabled by default … (except Spot VMs). If you disable automatic restart,
  then an instance failure makes the instance enter the TERMINATED state" (read in its zh-CN and ja versions: the
  stored English copy ends before that section).
- Scheduling.automaticRestart: "restarted if it is terminated by Compute Engine (not terminated by a user)".

So a status on the way somewhere (COMING_UP, GOING_DOWN) is left alone: Compute Engine moves it on by itself, and
with automatic restart a VM going down comes back. A status at rest (AT_REST) is where a VM stays: nothing in the
instance says that Google will still start it, and a person cannot ("Stop or restart a Compute Engine instance",
Limitations: TPU instances cannot be restarted), so it is replaced.
"""

from __future__ import annotations

RUNNING = "RUNNING"
COMING_UP = ("PENDING", "PROVISIONING", "STAGING", "REPAIRING")
GOING_DOWN = ("PENDING_STOP", "STOPPING", "SUSPENDING", "DEPROVISIONING")
AT_REST = ("TERMINATED", "STOPPED", "SUSPENDED")


def stopped_for_good(status: str) -> bool:
    """Whether a VM in `status` stays there: only a new VM runs the run again."""
    return status in AT_REST


def google_brings_it_back(status: str, automatic_restart: bool) -> bool:
    """Whether Compute Engine brings a VM in `status` back to RUNNING by itself: one coming up, and one going down
    whose automatic restart is on (off for Spot and flex-start, infra/resources/vm.py `scheduling_fields`)."""
    return status in COMING_UP or (status in GOING_DOWN and automatic_restart)
