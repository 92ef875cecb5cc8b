"""Google's rules for a managed instance group that forms a TPU slice, as Compute Engine applies them to the group's
create request: the mock engine (rehearsal/engine.py) refuses a group that breaks one, with the error Compute Engine
answers, and the program's run fails.

Enforced:
- A group whose workload policy has an accelerator topology (a multi-host TPU slice) must create its VMs in bulk
  (`targetSizePolicy.mode: BULK`). The rule and its error come from a field report, not Google's text: a runbook of
  someone who created v6e slices as MIGs (2026-07-20) quotes the 400 "MIGs with TPU accelerator topology require
  BULK mode in target size policy". Google's text says what bulk mode is (compute/docs/instance-groups/
  about-bulk-mode: "To enable bulk mode in a MIG, you must set the target size policy mode to BULK and specify a
  target size") and that its mode cannot be changed on an existing group (the same page, in its translations).

Not enforced: Google's statement that bulk mode is "only supported with instance templates that specify either a
reservation-bound or flex-start provisioning model" (compute/docs/instance-groups/bulk-create-instances-in-mig),
which its TPU pages contradict (on-demand and Spot multi-host slices); the refusal of resize requests in TPU groups,
and of a changed mode, which need the group's history, which the mock engine does not keep.
"""

from __future__ import annotations

from typing import Any

GROUP = "gcp:compute/instanceGroupManager:InstanceGroupManager"
WORKLOAD_POLICY = "gcp:compute/resourcePolicy:ResourcePolicy"
BULK_REQUIRED = (
    "googleapi: Error 400: MIGs with TPU accelerator topology require BULK mode in target size policy., badRequest"
)


class GroupRefused(Exception):
    """What Compute Engine answers to a group's create request that breaks one of its rules: a 400."""


def refuse_a_tpu_group_not_in_bulk(state: dict[str, Any], policies: dict[str, dict[str, Any]]) -> None:
    """`policies`: the resource policies created so far, by self link (what the group names them by)."""
    link = (state.get("resourcePolicies") or {}).get("workloadPolicy") or ""
    topology = ((policies.get(link) or {}).get("workloadPolicy") or {}).get("acceleratorTopology")
    modes = [p.get("mode") for p in state.get("targetSizePolicies") or []]
    if topology and modes != ["BULK"]:
        raise GroupRefused(BULK_REQUIRED)
