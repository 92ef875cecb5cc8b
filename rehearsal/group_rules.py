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
- A resize request in a group of TPU VMs (its template's machine type `ct6e-*`, tpu-sft's only TPU machine types) is
  refused. From the same field report (2026-07-20), which quotes "Creating resize requests for managed instance group
  with TPU is not allowed"; Google's Chinese page on bulk mode lists resize requests among what bulk mode does not
  support.

- A group with no accelerator topology in bulk mode whose template is not RESERVATION_BOUND or FLEX_START: Google's
  "only supported with instance templates that specify either a reservation-bound or flex-start provisioning model"
  (compute/docs/instance-groups/bulk-create-instances-in-mig; rehearsal/managed_group.py).

Not enforced: that rule for a slice's group, which Google's TPU pages contradict (on-demand and Spot multi-host
slices); the refusal of a changed mode, which needs
the group's history, which the mock engine does not keep; other TPU machine types than ct6e (ct5p, tpu7x), which
the program never declares.
"""

from __future__ import annotations

from typing import Any

from rehearsal import managed_group

GROUP = "gcp:compute/instanceGroupManager:InstanceGroupManager"
WORKLOAD_POLICY = "gcp:compute/resourcePolicy:ResourcePolicy"
TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
RESIZE_REQUEST = "gcp:compute/resizeRequest:ResizeRequest"
BULK_REQUIRED = (
    "googleapi: Error 400: MIGs with TPU accelerator topology require BULK mode in target size policy., badRequest"
)
NO_TPU_RESIZE_REQUESTS = (
    "googleapi: Error 400: Creating resize requests for managed instance group with TPU is not allowed., badRequest"
)
TPU_MACHINE_TYPES = "ct6e-"


class GroupRefused(Exception):
    """What Compute Engine answers to a group's create request that breaks one of its rules: a 400."""


def refuse_a_tpu_group_not_in_bulk(state: dict[str, Any], policies: dict[str, dict[str, Any]]) -> None:
    """`policies`: the resource policies created so far, by self link (what the group names them by)."""
    link = (state.get("resourcePolicies") or {}).get("workloadPolicy") or ""
    topology = ((policies.get(link) or {}).get("workloadPolicy") or {}).get("acceleratorTopology")
    modes = [p.get("mode") for p in state.get("targetSizePolicies") or []]
    if topology and modes != ["BULK"]:
        raise GroupRefused(BULK_REQUIRED)


def refuse_bulk_without_its_models(
    state: dict[str, Any], policies: dict[str, dict[str, Any]], templates: dict[str, dict[str, Any]]
) -> None:
    """`templates`: the instance templates created so far, by unique self link (what a group's version names)."""
    link = (state.get("resourcePolicies") or {}).get("workloadPolicy") or ""
    topology = ((policies.get(link) or {}).get("workloadPolicy") or {}).get("acceleratorTopology")
    for version in state.get("versions") or []:
        template = templates.get(version.get("instanceTemplate") or "") or {}
        try:
            managed_group.refuse_bulk_without_its_models(state, template, has_topology=bool(topology))
        except managed_group.Refused as refused:
            raise GroupRefused(str(refused)) from None


def refuse_a_resize_request_in_a_tpu_group(
    state: dict[str, Any], groups: dict[str, dict[str, Any]], templates: dict[str, dict[str, Any]]
) -> None:
    """`groups`: the groups created so far, by name (what a request names its group by); `templates`: the instance
    templates, by unique self link (what a group's version names)."""
    group = groups.get(state.get("instanceGroupManager") or "") or {}
    for version in group.get("versions") or []:
        machine_type = (templates.get(version.get("instanceTemplate") or "") or {}).get("machineType") or ""
        if machine_type.startswith(TPU_MACHINE_TYPES):
            raise GroupRefused(NO_TPU_RESIZE_REQUESTS)
