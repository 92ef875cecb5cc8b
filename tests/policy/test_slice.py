"""The policy pack knows slices: its rules on the VM (reservation, boot disk, labels, run cap, external IP) apply
to a slice's instance template, and a slice's MIG must not recreate hosts Google ended."""

import pytest

from policy import crossguard
from policy.catalog import ADVISORY, MANDATORY, check_resource, check_stack
from policy.model import INSTANCE_GROUP_MANAGER, INSTANCE_TEMPLATE, Resource
from tests.fixtures.mock_engine import DISK_KEYS
from tests.policy.test_crossguard import run

SLICE = {"tpu-sft:acceleratorType": "v6e-16", "tpu-sft:autostop": "off"}


def _declared(stack):
    return [
        Resource(r.type, r.name, r.inputs, protect=r.protect, retain_on_delete=r.retain_on_delete)
        for r in stack.resources
    ]


@pytest.fixture
def slice_resources(mock_stack, dev_config):
    def run_slice(overrides=None, remove=()):
        config = {**SLICE, **(overrides or {})}
        stack = mock_stack(config, remove=(*DISK_KEYS, *remove))
        stack_config = {k: v for k, v in {**dev_config, **config}.items() if k not in (*DISK_KEYS, *remove)}
        return _declared(stack), stack_config

    return run_slice


def test_the_declared_slice_passes_every_mandatory_rule(slice_resources):
    resources, stack_config = slice_resources()
    found = check_stack(resources, stack_config=stack_config)
    assert [v for v in found if v.level == MANDATORY] == []
    # the dev stack keeps an external IP behind IAP: the advisory names the template, as it names the VM
    assert [(v.policy, v.resource) for v in found] == [("no-external-ip-behind-iap", "tpu-sft-dev-template")]


def test_rules_see_a_broken_slice(slice_resources):
    resources, stack_config = slice_resources(
        {
            "tpu-sft:bootDiskSizeGb": "150",
            "tpu-sft:provisioningModel": "STANDARD",  # a reservation-bound slice ends with its reservation: no advisory
            "tpu-sft:maxRunHours": "off",
            "tpu-sft:labels": '{"owner": "me"}',
        }
    )
    found = {(v.policy, v.level, v.resource) for v in check_stack(resources, stack_config=stack_config)}
    assert found == {
        ("boot-disk-fits-maxtext", MANDATORY, "tpu-sft-dev-template"),
        ("billable-resources-labelled", MANDATORY, "tpu-sft-dev-template"),
        ("run-duration-capped", ADVISORY, "tpu-sft-dev-template"),
        ("no-external-ip-behind-iap", ADVISORY, "tpu-sft-dev-template"),
    }


FLEX_START = {"tpu-sft:provisioningModel": "FLEX_START"}


def test_a_flex_start_slice_passes_as_the_others_do(slice_resources):
    """Its template (FLEX_START, NO_RESERVATION, the run cap) and its empty group pass every mandatory rule."""
    resources, stack_config = slice_resources(FLEX_START, remove=("tpu-sft:reservation",))
    assert "gcp:compute/instanceGroupManager:InstanceGroupManager" in {r.type for r in resources}
    found = check_stack(resources, stack_config=stack_config)
    assert [(v.policy, v.level, v.resource) for v in found] == [
        ("no-external-ip-behind-iap", ADVISORY, "tpu-sft-dev-template")
    ]


def test_rules_still_see_a_broken_flex_start_slice(slice_resources):
    resources, stack_config = slice_resources(
        {**FLEX_START, "tpu-sft:bootDiskSizeGb": "150", "tpu-sft:labels": '{"owner": "me"}'},
        remove=("tpu-sft:reservation",),
    )
    found = {(v.policy, v.level, v.resource) for v in check_stack(resources, stack_config=stack_config)}
    assert found == {
        ("boot-disk-fits-maxtext", MANDATORY, "tpu-sft-dev-template"),
        ("billable-resources-labelled", MANDATORY, "tpu-sft-dev-template"),
        ("no-external-ip-behind-iap", ADVISORY, "tpu-sft-dev-template"),
    }


def test_the_slices_own_firewall_is_no_way_in_from_outside(slice_resources):
    """Sourced by tags only: with an external IP and SSH from IAP alone, the advisory still fires; with SSH also
    open to 203.0.113.0/24 (a slice is reached through IAP: tpu-sft:access direct is refused), it does not."""
    resources, _ = slice_resources({"tpu-sft:sshSourceRanges": '["35.235.240.0/20", "203.0.113.0/24"]'})
    assert [v for v in check_stack(resources) if v.policy == "no-external-ip-behind-iap"] == []
    resources, stack_config = slice_resources({"tpu-sft:externalIp": "false"})
    assert check_stack(resources, stack_config=stack_config) == []


TEMPLATE = {
    "machineType": "ct6e-standard-4t",
    "disks": [{"boot": True, "diskSizeGb": 200, "sourceImage": "img"}],
    "scheduling": {"provisioningModel": "RESERVATION_BOUND", "maxRunDuration": {"seconds": 3600}},
    "reservationAffinity": {
        "type": "SPECIFIC_RESERVATION",
        "specificReservation": {"key": "compute.googleapis.com/reservation-name", "values": ["r"]},
    },
    "labels": {"app": "tpu-sft", "stack": "dev", "owner": "o", "cost-center": "c"},
}


@pytest.mark.parametrize(
    ("change", "policy"),
    [
        ({"reservationAffinity": None}, "reservation-bound-has-reservation"),
        ({"disks": [{"boot": True, "diskSizeGb": 100}]}, "boot-disk-fits-maxtext"),
        ({"disks": [{"boot": False, "diskSizeGb": 500}]}, "boot-disk-fits-maxtext"),  # no boot disk: the image's 10 GB
        ({"labels": {"app": "tpu-sft"}}, "billable-resources-labelled"),
        ({"scheduling": {"provisioningModel": "SPOT"}, "reservationAffinity": None}, "run-duration-capped"),
        (
            {"scheduling": {"provisioningModel": "FLEX_START"}, "reservationAffinity": {"type": "NO_RESERVATION"}},
            "run-duration-capped",
        ),
    ],
)
def test_each_host_rule_reads_the_template(change, policy):
    assert [v.policy for v in check_resource(INSTANCE_TEMPLATE, {**TEMPLATE, **change}, name="t")] == [policy]
    assert check_resource(INSTANCE_TEMPLATE, TEMPLATE, name="t") == []


@pytest.mark.parametrize(
    ("props", "found"),
    [
        ({"instanceLifecyclePolicy": {"defaultActionOnFailure": "DO_NOTHING"}}, []),
        ({"instanceLifecyclePolicy": {"defaultActionOnFailure": "REPAIR"}}, ["slice-hosts-stay-ended"]),
        ({}, ["slice-hosts-stay-ended"]),  # REPAIR is the API's default
    ],
)
def test_a_mig_must_not_recreate_ended_hosts(props, found):
    violations = check_resource(INSTANCE_GROUP_MANAGER, props, name="tpu-sft-dev")
    assert [v.policy for v in violations] == found
    for v in violations:
        assert "defaultActionOnFailure DO_NOTHING" in v.message and "\n" not in v.message


def test_crossguard_runs_the_same_rules_on_a_template_and_a_mig():
    policies = {p.name: p for p in crossguard.policies({})}
    small = {**TEMPLATE, "disks": [{"boot": True, "diskSizeGb": 50}]}
    [message] = run(policies["boot-disk-fits-maxtext"], INSTANCE_TEMPLATE, small)
    assert "50 GB" in message
    assert run(policies["boot-disk-fits-maxtext"], INSTANCE_TEMPLATE, TEMPLATE) == []
    [message] = run(policies["slice-hosts-stay-ended"], INSTANCE_GROUP_MANAGER, {"targetSize": 4})
    assert message.startswith("instance group res recreates hosts")
