"""The rules as CrossGuard runs them: the SDK's own argument objects, its unknown-checking proxies, policy
config, the stack config the engine passes in PULUMI_CONFIG, and the pack's entry point."""

import json
import runpy
import sys
from pathlib import Path

import pulumi_policy
import pytest
import yaml
from pulumi_policy import (
    EnforcementLevel,
    PolicyCustomTimeouts,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
)
from pulumi_policy.proxy import UNKNOWN_NUMBER_VALUE, UnknownValueError, unknown_checking_proxy

from policy import crossguard
from policy.model import DISK, FIREWALL, INSTANCE
from workload.core.contract import PROJECT_PYTHON

ROOT = Path(__file__).resolve().parents[2]
KEY = "compute.googleapis.com/reservation-name"
LABELS = {"app": "tpu-sft", "stack": "dev", "owner": "ml-platform", "cost-center": "research"}
VM = {
    "bootDisk": {"initializeParams": {"size": 200}},
    "scheduling": {"provisioningModel": "RESERVATION_BOUND", "maxRunDuration": {"seconds": 3600}},
    "reservationAffinity": {"type": "SPECIFIC_RESERVATION", "specificReservation": {"key": KEY, "values": ["r"]}},
    "networkInterfaces": [{"network": "default", "accessConfigs": [{}]}],
    "tags": ["vm"],
    "labels": LABELS,
}
DATA_DISK = {"size": 100, "labels": {**LABELS, "tpu-sft-role": "data"}}
SSH = {"allows": [{"protocol": "tcp", "ports": ["22"]}], "sourceRanges": ["35.235.240.0/20"], "targetTags": ["vm"]}


def options(protect=False):
    return PolicyResourceOptions(protect, [], None, [], PolicyCustomTimeouts(0, 0, 0), [])


def by_name(stack_config=None):
    return {p.name: p for p in crossguard.policies(stack_config or {})}


def run(policy, type_, props, *, config=None, protect=False):
    """Validate one resource as the SDK does: proxied props, its options, the policy's config."""
    reports = []
    proxied = unknown_checking_proxy(props)
    args = ResourceValidationArgs(type_, proxied, f"urn:{type_}", "res", options(protect), None, config)
    policy.validate(args, lambda message, urn: reports.append(message))
    return reports


def test_every_rule_becomes_a_policy_with_its_level_and_schema():
    policies = by_name()
    assert len(policies) == 9
    assert policies["ssh-not-open-to-internet"].enforcement_level is EnforcementLevel.MANDATORY
    assert policies["run-duration-capped"].enforcement_level is EnforcementLevel.ADVISORY
    assert isinstance(policies["no-external-ip-behind-iap"], pulumi_policy.StackValidationPolicy)
    assert policies["billable-resources-labelled"].config_schema.properties["requiredLabels"]["default"] == [
        "app",
        "stack",
        "owner",
        "cost-center",
    ]
    assert policies["ssh-not-open-to-internet"].config_schema is None


@pytest.mark.parametrize(
    ("name", "type_", "props", "reported"),
    [
        ("ssh-not-open-to-internet", FIREWALL, SSH, 0),
        ("ssh-not-open-to-internet", FIREWALL, {**SSH, "sourceRanges": ["0.0.0.0/0"]}, 1),
        ("boot-disk-fits-maxtext", INSTANCE, VM, 0),
        ("boot-disk-fits-maxtext", INSTANCE, {**VM, "bootDisk": {"initializeParams": {"size": 50}}}, 1),
        ("billable-resources-labelled", DISK, DATA_DISK, 0),
        ("billable-resources-labelled", DISK, {"labels": {}}, 1),
        ("boot-disk-fits-maxtext", DISK, DATA_DISK, 0),  # a rule looks only at its own resource types
    ],
)
def test_resource_policies_report_through_the_sdk(name, type_, props, reported):
    assert len(run(by_name()[name], type_, props)) == reported


def test_policy_config_reaches_the_rule():
    policy = by_name()["boot-disk-fits-maxtext"]
    [message] = run(policy, INSTANCE, VM, config={"minimumGb": 300})
    assert "below the 300 GB" in message


@pytest.mark.parametrize(
    ("stack_config", "protect", "reported"),
    [
        pytest.param({}, False, 1, id="unguarded"),
        pytest.param({"tpu-sft:keepDataDisk": "true"}, False, 0, id="kept-read-from-stack-config"),
        pytest.param({"tpu-sft:allowDataDiskReplace": "true"}, False, 0, id="replace-allowed"),
        pytest.param({}, True, 0, id="protected"),
    ],
)
def test_data_disk_guard_in_a_real_preview(stack_config, protect, reported):
    policy = by_name(stack_config)["data-disk-survives-replace"]
    assert len(run(policy, DISK, DATA_DISK, protect=protect)) == reported


def test_a_value_unknown_during_preview_is_left_to_the_sdk():
    props = {**VM, "bootDisk": {"initializeParams": {"size": UNKNOWN_NUMBER_VALUE}}}
    policy = by_name()["boot-disk-fits-maxtext"]
    # The SDK catches this and reports "can't be known during preview" as advisory, instead of a false verdict.
    with pytest.raises(UnknownValueError):
        run(policy, INSTANCE, props)
    assert run(by_name()["reservation-bound-has-reservation"], INSTANCE, props) == []


def test_stack_policy_reports_against_the_instance_urn():
    def resource(type_, name, props):
        return PolicyResource(type_, unknown_checking_proxy(props), f"urn:{name}", name, options(), None, None, [], {})

    reports = []
    args = StackValidationArgs([resource(INSTANCE, "vm", VM), resource(FIREWALL, "ssh", SSH)])
    by_name()["no-external-ip-behind-iap"].validate(args, lambda message, urn: reports.append((urn, message)))
    [(urn, message)] = reports
    assert urn == "urn:vm" and "external IP" in message


def test_entry_point_builds_the_pack_with_the_engines_stack_config(monkeypatch):
    built = {}
    monkeypatch.setattr(pulumi_policy, "PolicyPack", lambda **kwargs: built.update(kwargs))
    monkeypatch.setattr(sys, "path", list(sys.path))
    monkeypatch.setenv("PULUMI_CONFIG", json.dumps({"tpu-sft:allowDataDiskReplace": "true"}))
    runpy.run_path(str(ROOT / "policy" / "__main__.py"), run_name="__main__")
    assert built["name"] == "tpu-sft"
    assert built["enforcement_level"] is EnforcementLevel.MANDATORY
    policies = {p.name: p for p in built["policies"]}
    assert run(policies["data-disk-survives-replace"], DISK, DATA_DISK) == []


def test_pack_runs_in_the_project_venv():
    """The pack's venv is the Pulumi program's, the one the tasks' commands run (the contract's PROJECT_PYTHON) and
    scripts/venv builds from requirements.txt, which pins pulumi-policy. Read from the files, not from the Python
    running these tests, which may be any venv holding requirements.txt."""
    pack = yaml.safe_load((ROOT / "policy" / "PulumiPolicy.yaml").read_text())
    program = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    assert pack["runtime"]["name"] == program["runtime"]["name"] == "python"
    venv = (ROOT / "policy" / pack["runtime"]["options"]["virtualenv"]).resolve()
    assert venv == (ROOT / program["runtime"]["options"]["virtualenv"]).resolve()
    assert venv == (ROOT / PROJECT_PYTHON).parent.parent.resolve()
    pins = (ROOT / "requirements.txt").read_text().splitlines()
    assert [pin for pin in pins if pin.startswith("pulumi-policy==")]
