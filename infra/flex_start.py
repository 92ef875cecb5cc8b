"""A slice of flex-start hosts (tpu-sft:provisioningModel FLEX_START on v6e-16 … v6e-256): what differs from a slice
whose managed instance group (MIG) makes its hosts itself. Pure facts, no resources: infra/slice.py declares them
and infra/plan.py answers from the same `group_description`.

Read in Google's and the provider's own words:
- "Resize Requests are the Managed Instance Group implementation of Dynamic Workload Scheduler Flex Start"
  (pulumi-gcp 10.2.0 `compute.ResizeRequest`, from magic-modules `mmv1/products/compute/ResizeRequest.yaml`).
  A MIG gets flex-start VMs through a resize request: "The MIG schedules Flex-start VM creation as soon as
  resources are available … the VMs run until … Compute Engine deletes the Flex-start VMs at the end of their run
  duration" (cloud.google.com/compute/docs/instance-groups/about-resize-requests-mig). On creation the request
  raises the group's target size by `resizeBy`; its `requestedRunDuration` is "between 10 minutes and seven days".
- The provider's own example of a MIG for resize requests (pulumi-gcp `RegionResizeRequest`): a template with
  `provisioningModel FLEX_START`, `instanceTerminationAction DELETE`, `maxRunDuration` and reservation affinity
  `NO_RESERVATION`, "compatible with DWS resize requests"; the group with no target size (the provider's default,
  0), `defaultActionOnFailure DO_NOTHING` and `waitForInstances false`.
- The resize request is immutable (`immutable: true` in ResizeRequest.yaml): any change is a new request. Its
  create waits for the insert operation only (`async: OpAsync`).
- The group's `targetSize` is read back from the API on refresh (terraform-provider-google's instance group
  manager `Read`: `d.Set("target_size", manager.TargetSize)`), and "`lifecycle.ignore_changes` can be used to
  prevent Terraform from modifying the value" (pulumi-gcp's `target_size` doc).

Inferred, not read (docs/slices.md, "Flex-start hosts"): that a request for a TPU slice's hosts is accepted with the
workload policy on the group; that the insert operation ends when the request is accepted, before any host exists;
that its hosts are numbered like the group's own (-01 … -N); and what deleting a fulfilled request does to its hosts.
"""

from __future__ import annotations

from infra.settings import Settings

MODEL = "FLEX_START"
# Flex-start hosts come from the request, not the group: it starts empty, and its target size, which the request
# raises, is never set back by a later `pulumi up` (infra/slice.py ignores it).
EMPTY_GROUP = 0
# Compute Engine picks no reservation for these hosts, as in the provider's example for resize requests.
NO_RESERVATION = "NO_RESERVATION"


def is_flex_start(s: Settings) -> bool:
    return s.is_slice and s.provisioning_model == MODEL


def run_duration_seconds(s: Settings) -> str:
    """The request's `requestedRunDuration.seconds` (a string in the API): tpu-sft:maxRunHours, which
    infra/settings.py requires for FLEX_START and keeps within seven days."""
    if s.max_run_hours is None:
        raise ValueError("FLEX_START needs tpu-sft:maxRunHours (infra/settings.py flex_start_needs_run_cap)")
    return str(s.max_run_hours * 3600)


def group_description(s: Settings) -> str | None:
    """The MIG's description for a flex-start slice, None for any other. infra/slice.py replaces the group when it
    changes: a new request (another run duration, or flex-start switched on or off) would add hosts beside those
    the group already holds, so the group, its hosts and its request are made anew instead."""
    if not is_flex_start(s):
        return None
    return (
        f"tpu-sft: the {s.accelerator.name} slice, {s.accelerator.hosts} flex-start hosts from a resize request, "
        f"each for at most {s.max_run_hours} h"
    )
