"""A single FLEX_START VM is what Google's flex-start (DWS) documentation asks of one, as a slice's flex-start hosts
already were: a run duration of at most seven days with a termination action (DELETE), no reservation, TERMINATE on
host maintenance and no automatic restart. The mock engine's Compute Engine stand-in refuses a FLEX_START instance or
template that leaves one out (rehearsal/flex_start_rules.py).

Sources, read through the search tool on 2026-12-05: "About Flex-start VMs"
(cloud.google.com/compute/docs/instances/about-flex-start-vms): "Flex-start VMs can run for up to seven days. After
that time, Compute Engine automatically stops or deletes the VMs based on the termination action that is specified in
the VM properties"; "Create a Flex-start VM" (cloud.google.com/compute/docs/instances/create-flex-start-vm) and the
provider's flex-start example (pulumi-gcp RegionResizeRequest: reservation affinity NO_RESERVATION). Not sent, because
pulumi-gcp 10.2.0's Instance cannot: the window the request waits for capacity (`--request-valid-for-duration`).
"""

from __future__ import annotations

import pytest
from pulumi import RunError

from rehearsal import flex_start_rules

INSTANCE = "gcp:compute/instance:Instance"
FLEX_VM = {"tpu-sft:provisioningModel": "FLEX_START", "tpu-sft:maxRunHours": "4"}


def complete() -> dict:
    return {
        "scheduling": {
            "provisioningModel": "FLEX_START",
            "maxRunDuration": {"seconds": 4 * 3600},
            "instanceTerminationAction": "DELETE",
            "onHostMaintenance": "TERMINATE",
            "automaticRestart": False,
        },
        "reservationAffinity": {"type": "NO_RESERVATION"},
    }


@pytest.mark.parametrize(
    ("break_it", "named"),
    [
        (lambda s: s["scheduling"].pop("maxRunDuration"), "maxRunDuration"),
        (lambda s: s["scheduling"].update(maxRunDuration={"seconds": 7 * 24 * 3600 + 1}), "seven days"),
        (lambda s: s["scheduling"].update(instanceTerminationAction="STOP"), "instanceTerminationAction"),
        (lambda s: s.pop("reservationAffinity"), "NO_RESERVATION"),
        (lambda s: s["scheduling"].update(onHostMaintenance="MIGRATE"), "onHostMaintenance"),
        (lambda s: s["scheduling"].pop("automaticRestart"), "automaticRestart"),
    ],
)
def test_the_stand_in_refuses_a_flex_start_vm_that_leaves_a_rule_out(break_it, named):
    state = complete()
    assert flex_start_rules.refusals(state) == []
    break_it(state)
    with pytest.raises(ValueError, match=named):
        flex_start_rules.refuse_an_incomplete_flex_start_vm(INSTANCE, state)


def test_a_single_flex_start_vm_is_complete(mock_stack):
    vm = mock_stack(FLEX_VM, remove=("tpu-sft:reservation",)).one(INSTANCE).inputs  # the stand-in let it through
    assert flex_start_rules.refusals(vm) == []
    assert vm["reservationAffinity"] == {"type": "NO_RESERVATION"}
    assert vm["scheduling"]["maxRunDuration"] == {"seconds": 4 * 3600}


def test_the_single_vm_and_a_slices_hosts_take_the_same_affinity(mock_stack, slice_stack):
    """One rule for both (infra/resources/flex_start.py takes_no_reservation), not two copies."""
    vm = mock_stack(FLEX_VM, remove=("tpu-sft:reservation",)).one(INSTANCE).inputs
    template = slice_stack("v6e-16", FLEX_VM, remove=("tpu-sft:reservation",)).one(flex_start_rules.TEMPLATE).inputs
    assert vm["reservationAffinity"] == template["reservationAffinity"]


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"tpu-sft:maxRunHours": "off"}, "tpu-sft:maxRunHours"),
        ({"tpu-sft:maxRunHours": "169"}, "tpu-sft:maxRunHours"),
        ({"tpu-sft:reservation": "my-v6e-reservation"}, "tpu-sft:reservation"),
    ],
)
def test_what_a_flex_start_vm_cannot_be_given_is_refused_before_anything_is_declared(mock_stack, overrides, key):
    with pytest.raises(RunError, match=key) as refused:
        remove = () if key == "tpu-sft:reservation" else ("tpu-sft:reservation",)
        mock_stack({"tpu-sft:provisioningModel": "FLEX_START", **overrides}, remove=remove)
    assert "\n" not in str(refused.value) and "Fix:" in str(refused.value)
