"""The pack's rules as a whole: names and levels, configuration from policy and stack config, and running
them without an engine over resources given as plain values (what a mock-engine test collects)."""

import pytest

from policy import catalog
from policy.model import BUCKET, DISK, FIREWALL, INSTANCE, INSTANCE_GROUP_MANAGER, Resource, Violation

KEY = "compute.googleapis.com/reservation-name"
LABELS = {"app": "tpu-sft", "stack": "dev", "owner": "ml-platform", "cost-center": "research"}
VM = {
    "machineType": "ct6e-standard-8t",
    "bootDisk": {"initializeParams": {"size": 200}},
    "scheduling": {"provisioningModel": "RESERVATION_BOUND", "maxRunDuration": {"seconds": 14400}},
    "reservationAffinity": {"type": "SPECIFIC_RESERVATION", "specificReservation": {"key": KEY, "values": ["r"]}},
    "networkInterfaces": [{"network": "default"}],
    "tags": ["tpu-sft-dev"],
    "labels": LABELS,
}
DATA_DISK = {"size": 100, "labels": {**LABELS, "tpu-sft-role": "data"}}
SSH = {
    "allows": [{"protocol": "tcp", "ports": ["22"]}],
    "sourceRanges": ["35.235.240.0/20"],
    "targetTags": ["tpu-sft-dev"],
}


def test_rule_names_and_levels():
    levels = {rule.name: rule.level for rule in catalog.RESOURCE_RULES + catalog.STACK_RULES}
    assert levels == {
        "ssh-not-open-to-internet": "mandatory",
        "reservation-bound-has-reservation": "mandatory",
        "billable-resources-labelled": "mandatory",
        "data-disk-survives-replace": "mandatory",
        "checkpoint-bucket-survives-replace": "mandatory",
        "boot-disk-fits-maxtext": "mandatory",
        "run-duration-capped": "advisory",
        "slice-hosts-stay-ended": "mandatory",
        "no-external-ip-behind-iap": "advisory",
    }


def test_every_config_property_has_a_default():
    for rule in catalog.RESOURCE_RULES + catalog.STACK_RULES:
        assert all("default" in schema for schema in rule.config.values()), rule.name


def test_a_conforming_stack_has_no_violation():
    resources = [
        Resource(INSTANCE, "vm", VM),
        Resource(DISK, "data", DATA_DISK, retain_on_delete=True),
        Resource(FIREWALL, "ssh", SSH),
        Resource("tpu-sft:infra:TpuVm", "vm", {}),
    ]
    assert catalog.check_stack(resources) == []


def test_check_resource_reports_rule_level_and_resource():
    world = {**SSH, "sourceRanges": ["0.0.0.0/0"]}
    [violation] = catalog.check_resource(FIREWALL, world, name="ssh")
    assert (violation.policy, violation.level, violation.resource) == ("ssh-not-open-to-internet", "mandatory", "ssh")
    assert str(violation) == f"[mandatory] ssh-not-open-to-internet (ssh): {violation.message}"


def test_check_stack_runs_stack_rules_too():
    vm_with_ip = {**VM, "networkInterfaces": [{"network": "default", "accessConfigs": [{}]}]}
    found = catalog.check_stack([Resource(INSTANCE, "vm", vm_with_ip), Resource(FIREWALL, "ssh", SSH)])
    assert [(v.policy, v.level, v.resource) for v in found] == [("no-external-ip-behind-iap", "advisory", "vm")]


TEAM_ONLY = {"billable-resources-labelled": {"requiredLabels": ["team"]}}


@pytest.mark.parametrize(
    ("policy_config", "labels", "expected"),
    [
        pytest.param({}, LABELS, [], id="default-keys-present"),
        pytest.param(TEAM_ONLY, LABELS, ["team"], id="configured-missing"),
        pytest.param(TEAM_ONLY, {"team": "ml"}, [], id="configured-present"),
    ],
)
def test_required_labels_come_from_policy_config(policy_config, labels, expected):
    found = catalog.check_resource(DISK, {"labels": labels}, name="d", policy_config=policy_config)
    assert [v.policy for v in found] == ["billable-resources-labelled"] * len(expected)
    assert all(f"lacks the label(s) {', '.join(expected)}" in v.message for v in found)


def test_boot_disk_minimum_comes_from_policy_config():
    config = {"boot-disk-fits-maxtext": {"minimumGb": 300}}
    found = catalog.check_resource(INSTANCE, VM, name="vm", policy_config=config)
    assert [v.policy for v in found] == ["boot-disk-fits-maxtext"]
    assert "below the 300 GB" in found[0].message


@pytest.mark.parametrize(
    ("options", "stack_config", "violated"),
    [
        pytest.param({}, {}, True, id="unguarded"),
        pytest.param({}, {"tpu-sft:allowDataDiskReplace": "false"}, True, id="explicitly-not-allowed"),
        pytest.param({}, {"tpu-sft:allowDataDiskReplace": "true"}, False, id="allowed-as-engine-passes-it"),
        pytest.param({}, {"tpu-sft:allowDataDiskReplace": True}, False, id="allowed-as-a-bool"),
        pytest.param({"retain_on_delete": True}, {}, False, id="retained"),
        pytest.param({"protect": True}, {}, False, id="protected"),
    ],
)
def test_data_disk_guard_from_options_and_stack_config(options, stack_config, violated):
    found = catalog.check_resource(DISK, DATA_DISK, options, name="data", stack_config=stack_config)
    assert [v.policy for v in found] == (["data-disk-survives-replace"] if violated else [])


def test_every_message_is_one_line_saying_what_to_do():
    bad_vm = {"scheduling": {"provisioningModel": "RESERVATION_BOUND"}, "networkInterfaces": [{"accessConfigs": [{}]}]}
    resources = [
        Resource(INSTANCE, "vm", bad_vm),
        Resource(INSTANCE, "uncapped", {**bad_vm, "scheduling": {"provisioningModel": "STANDARD"}}),
        Resource(DISK, "data", {"labels": {"tpu-sft-role": "data"}}),
        Resource(FIREWALL, "ssh", {**SSH, "targetTags": ["elsewhere"], "sourceRanges": ["0.0.0.0/0", "::/0"]}),
        Resource(FIREWALL, "iap", {**SSH, "targetTags": []}),
        Resource(INSTANCE_GROUP_MANAGER, "slice", {"targetSize": 4}),
        Resource(BUCKET, "runs", {"forceDestroy": True}),
    ]
    found = catalog.check_stack(resources)
    assert {v.policy for v in found} == {r.name for r in catalog.RESOURCE_RULES + catalog.STACK_RULES}
    for violation in found:
        assert isinstance(violation, Violation)
        what, _, fix = violation.message.partition(": ")
        assert what and fix and "\n" not in violation.message, violation
