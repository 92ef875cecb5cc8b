"""A slice of flex-start hosts (tpu-sft:provisioningModel FLEX_START on v6e-16 … v6e-256): what differs from a slice
whose managed instance group (MIG) makes its hosts itself. Pure facts, no resources: infra/resources/slice.py declares
them and infra/plan/reruns.py answers from the same `group_description`.

How the hosts are asked for: the group starts empty, in BULK mode as every slice's group (infra/resources/slice.py), and
the first task resizes it to the slice's size and waits for Compute Engine to make every host
(remote/pipeline/capacity.py, which says why not a resize request: Compute Engine refuses those in a group of TPU
VMs). Read in Google's and the provider's own words:
- Flex-start VMs "run for up to seven days" and Compute Engine deletes them at the end of their run duration
  (cloud.google.com/compute/docs/instance-groups/about-resize-requests-mig); in a template that is
  `scheduling.maxRunDuration` with `instanceTerminationAction DELETE` (infra/resources/vm.py `scheduling_fields`).
- The provider's own example of a MIG for flex-start VMs (pulumi-gcp `RegionResizeRequest`): a template with
  `provisioningModel FLEX_START`, `instanceTerminationAction DELETE`, `maxRunDuration` and reservation affinity
  `NO_RESERVATION`; the group with no target size (the provider's default, 0), `defaultActionOnFailure DO_NOTHING`
  and `waitForInstances false`.
- The group's `targetSize` is read back from the API on refresh (terraform-provider-google's instance group
  manager `Read`: `d.Set("target_size", manager.TargetSize)`), and "`lifecycle.ignore_changes` can be used to
  prevent Terraform from modifying the value" (pulumi-gcp's `target_size` doc).

From a field report, not Google's text (a runbook of v6e slices made as MIGs, 2026-07-20): that this path, FLEX_START
in the template, a BULK group at size 0, then a plain resize to N, makes a flex-start TPU slice. Inferred, not read
(docs/slices.md, "Flex-start hosts"): that its hosts are numbered like any group's (-01 … -N).
"""

from __future__ import annotations

from infra.config.settings import Settings

MODEL = "FLEX_START"
# Flex-start hosts are asked for by the first task, not the group's declaration: it starts empty, and its target
# size, which the task raises, is never set back by a later `pulumi up` (infra/resources/slice.py ignores it).
EMPTY_GROUP = 0
# Compute Engine picks no reservation for these hosts, as in the provider's example for flex-start groups.
NO_RESERVATION = "NO_RESERVATION"


# How long Compute Engine keeps a flex-start request waiting for capacity at most: "By allowing your capacity requests
# to persist in a queue for up to two hours" (Google Cloud blog, "GPUs when you need them: Introducing Flex-start VMs",
# 2025-09-25; the Compute API's `requestValidForDuration`, which pulumi-gcp 10.2.0's Instance cannot send, so Google's
# default applies, which was not found: its longest is assumed). The provider waits for the create operation only 20
# minutes by default and then drops the VM's id (terraform-provider-google resource_compute_instance.go: `Create:
# schema.DefaultTimeout(20 * time.Minute)`; `resourceComputeInstanceCreate`: `d.SetId("")` when
# `ComputeOperationWaitTime(..., d.Timeout(schema.TimeoutCreate))` fails), so a VM Google filled later would run outside
# the state. A single flex-start VM's create waits the whole window, and 10 minutes more for the VM to be RUNNING.
REQUEST_VALID_MAX_S = 2 * 3600
CREATE_TIMEOUT = f"{REQUEST_VALID_MAX_S // 60 + 10}m"


def is_flex_start(s: Settings) -> bool:
    """A flex-start slice: its group starts empty and its first task fills it."""
    return s.is_slice and s.provisioning_model == MODEL


def takes_no_reservation(s: Settings) -> bool:
    """Any flex-start host, the single VM's (infra/resources/vm.py) or a slice's template's (infra/resources/slice.py):
    its capacity comes from DWS's pool, so it names no reservation (rehearsal/flex_start_rules.py says where each rule
    was read). Nothing else of a flex-start VM differs from the others' here: its run cap, DELETE at the cap, TERMINATE
    on host maintenance and no automatic restart are infra/resources/vm.py `scheduling_fields`, the cap required and at
    most seven days by infra/config/cross_key_rules.py. The window its request waits for capacity
    (`--request-valid-for-duration`) cannot be sent: pulumi-gcp 10.2.0's Instance has no such field, so Google's default
    applies (not found), and `pulumi up` waits for the VM as long as Google holds a request (`CREATE_TIMEOUT`)."""
    return s.provisioning_model == MODEL


def group_description(s: Settings) -> str | None:
    """The MIG's description for a flex-start slice, None for any other. infra/resources/slice.py replaces the group
    when it changes: another run cap would reach the hosts only when the group recreates them, and a flex-start group
    makes them once; flex-start switched on or off changes how its hosts are asked for. So the group and its hosts are
    made anew instead."""
    if not is_flex_start(s):
        return None
    return (
        f"tpu-sft: the {s.accelerator.name} slice, {s.accelerator.hosts} flex-start hosts made at once, "
        f"each for at most {s.max_run_hours} h"
    )
