"""maxRunHours: on by default for every provisioning model but RESERVATION_BOUND (whose VM ends with its reservation:
infra/pricing/run_cap.py cites Google), from the run's estimate with a margin; off only when asked (never for
FLEX_START); the policy pack warns when a VM Google would not end has no cap."""

import pytest

from infra.pricing.cost import estimate, seed_step_seconds
from infra.pricing.run_cap import default_max_run_hours
from policy import instance

INSTANCE = "gcp:compute/instance:Instance"
TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"


def host(stack):
    """The VM, or the template of the group of one that recreates a SPOT or STANDARD VM (tpu-sft:recovery auto): the
    cap is the same on each VM it makes."""
    [found] = stack.of_type(INSTANCE) or stack.of_type(TEMPLATE)
    return found


@pytest.mark.parametrize(
    ("model", "reservation"),
    [("STANDARD", "my-v6e-reservation"), ("STANDARD", None), ("SPOT", None), ("FLEX_START", None)],
)
def test_every_provisioning_model_but_reservation_bound_is_capped_by_default(mock_stack, model, reservation):
    overrides = {"tpu-sft:provisioningModel": model, **({"tpu-sft:reservation": reservation} if reservation else {})}
    vm = host(mock_stack(overrides, remove=() if reservation else ("tpu-sft:reservation",)))
    # The dev stack's run, 250 steps of batch 4 at the seed's 0.6 s per sequence (the seed's 1,000 of 1): estimated
    # 0.667 h → twice that plus an hour → rounded up to 4 h.
    assert vm.inputs["scheduling"]["maxRunDuration"] == {"seconds": 4 * 3600}
    # What Google does at the cap: delete, so nothing billable is left but the data disk.
    assert vm.inputs["scheduling"]["instanceTerminationAction"] == "DELETE"
    assert instance.run_duration_uncapped("vm", vm.inputs) == []


def test_the_default_follows_the_estimate_with_margin():
    run = estimate(8, 2.70, 1000, seed_step_seconds(1))
    assert run.run_hours == pytest.approx(0.667)
    assert default_max_run_hours(run) == 4
    # A much longer run gets a cap above twice its estimate.
    long_run = estimate(8, 2.70, 50_000, seed_step_seconds(1))  # 8.83 h
    assert default_max_run_hours(long_run) == 32 and 32 >= 2 * long_run.run_hours


def test_a_reservation_bound_vm_is_not_capped_by_default_and_the_policy_pack_does_not_warn(mock_stack):
    vm = mock_stack().one(INSTANCE)  # the dev stack: RESERVATION_BOUND
    assert vm.inputs["scheduling"]["provisioningModel"] == "RESERVATION_BOUND"
    assert "maxRunDuration" not in vm.inputs["scheduling"]
    # What Google does at the reservation's end: delete, as the seed's gcloud asks.
    assert vm.inputs["scheduling"]["instanceTerminationAction"] == "DELETE"
    assert instance.run_duration_uncapped("vm", vm.inputs) == []


def test_a_slice_bound_to_a_reservation_is_not_capped_by_default(slice_stack):
    template = slice_stack().one("gcp:compute/instanceTemplate:InstanceTemplate")
    assert "maxRunDuration" not in template.inputs["scheduling"]


def test_ordinary_step_changes_keep_the_cap_so_the_vm_is_not_replaced(mock_stack):
    """max_run_duration is ForceNew: a new cap would replace the VM and re-run every phase."""
    caps = {
        steps: host(
            mock_stack({"tpu-sft:steps": steps, "tpu-sft:provisioningModel": "SPOT"}, remove=("tpu-sft:reservation",))
        ).inputs["scheduling"]["maxRunDuration"]
        for steps in ("125", "250", "375", "500")  # the stack's batch 4: the tokens of 500 to 2,000 steps of 1
    }
    assert all(cap == {"seconds": 4 * 3600} for cap in caps.values()), caps


def test_an_explicit_cap_wins_a_reservation_bound_vm_too(mock_stack):
    vm = mock_stack({"tpu-sft:maxRunHours": "9"}).one(INSTANCE)
    assert vm.inputs["scheduling"]["maxRunDuration"] == {"seconds": 9 * 3600}


def test_off_removes_the_cap_and_the_policy_pack_warns(mock_stack):
    vm = mock_stack(
        {"tpu-sft:maxRunHours": "off", "tpu-sft:provisioningModel": "SPOT"}, remove=("tpu-sft:reservation",)
    )
    vm = host(vm)
    assert "maxRunDuration" not in vm.inputs["scheduling"]
    [warning] = instance.run_duration_uncapped("vm", vm.inputs)
    assert "no run-duration cap" in warning and "tpu-sft:maxRunHours" in warning
