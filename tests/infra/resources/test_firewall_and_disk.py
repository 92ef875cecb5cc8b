"""SSH ingress is narrow by default; the data disk is attached, labelled and kept only when asked."""

import pytest
from pulumi import RunError

FIREWALL = "gcp:compute/firewall:Firewall"
DISK = "gcp:compute/disk:Disk"
INSTANCE = "gcp:compute/instance:Instance"
DEFAULT_ALLOW_SSH_PRIORITY = 65534  # the default network's `default-allow-ssh`: tcp:22 from 0.0.0.0/0


def allow_rule(stack):
    [rule] = [r for r in stack.of_type(FIREWALL) if "allows" in r.inputs]
    return rule


def deny_rule(stack):
    [rule] = [r for r in stack.of_type(FIREWALL) if "denies" in r.inputs]
    return rule


def test_firewall_allows_ssh_from_iap_only(mock_stack):
    rule = allow_rule(mock_stack()).inputs
    assert rule["direction"] == "INGRESS"
    assert rule["network"] == "default"
    assert rule["allows"] == [{"protocol": "tcp", "ports": ["22"]}]
    assert rule["sourceRanges"] == ["35.235.240.0/20"]
    assert rule["targetTags"] == ["tpu-sft-dev"]


def test_the_stack_owns_the_vms_ingress(mock_stack):
    """A network whose default rules admit SSH from anywhere cannot reach the VM: everything else is denied on
    its tag, after our allow and before the defaults (GCE applies the lowest priority number)."""
    stack = mock_stack()
    allow, deny = allow_rule(stack).inputs, deny_rule(stack).inputs
    assert len(stack.of_type(FIREWALL)) == 2
    assert deny["direction"] == "INGRESS" and deny["network"] == allow["network"]
    assert deny["denies"] == [{"protocol": "all"}] and deny["sourceRanges"] == ["0.0.0.0/0"]
    assert deny["targetTags"] == allow["targetTags"] == stack.one(INSTANCE).inputs["tags"]
    assert allow["priority"] < deny["priority"] < DEFAULT_ALLOW_SSH_PRIORITY


def test_a_stack_that_lists_no_ranges_admits_iap_only(mock_stack):
    # Google's published IAP range, spelled out: a changed constant must not pass as its own expectation.
    rule = allow_rule(mock_stack(remove=("tpu-sft:sshSourceRanges",))).inputs
    assert rule["sourceRanges"] == ["35.235.240.0/20"]


def test_the_loud_setting_alone_opens_nothing(mock_stack):
    stack = mock_stack({"tpu-sft:dangerouslyAllowSshFromAnywhere": "true"}, remove=("tpu-sft:sshSourceRanges",))
    assert allow_rule(stack).inputs["sourceRanges"] == ["35.235.240.0/20"]


def test_firewall_targets_the_vm_tag(mock_stack):
    stack = mock_stack()
    assert allow_rule(stack).inputs["targetTags"] == stack.one(INSTANCE).inputs["tags"]


def test_user_listed_ranges(mock_stack):
    rule = allow_rule(mock_stack({"tpu-sft:sshSourceRanges": '["203.0.113.0/24", "2001:db8::/32"]'})).inputs
    assert rule["sourceRanges"] == ["203.0.113.0/24", "2001:db8::/32"]


def test_anywhere_needs_the_loud_setting(mock_stack):
    with pytest.raises(RunError, match="tpu-sft:sshSourceRanges"):
        mock_stack({"tpu-sft:sshSourceRanges": '["0.0.0.0/0"]'})
    rule = allow_rule(
        mock_stack({"tpu-sft:sshSourceRanges": '["0.0.0.0/0"]', "tpu-sft:dangerouslyAllowSshFromAnywhere": "true"})
    ).inputs
    assert rule["sourceRanges"] == ["0.0.0.0/0"]


def test_data_disk(mock_stack):
    disk = mock_stack().one(DISK)
    assert disk.inputs["zone"] == "us-east5-b"
    assert disk.inputs["size"] == 100
    assert disk.inputs["type"] == "hyperdisk-balanced"  # what v6e VMs can attach
    assert disk.inputs["labels"]["tpu-sft-role"] == "data"
    assert disk.inputs["labels"]["owner"] == "ml-platform"
    assert disk.retain_on_delete is False  # `pulumi destroy` deletes it: nothing billable left
    assert disk.protect is False


def test_data_disk_attached_to_vm_and_not_deleted_with_it(mock_stack):
    stack = mock_stack()
    disk, vm = stack.one(DISK), stack.one(INSTANCE)
    assert vm.inputs["attachedDisks"] == [
        {"source": "https://compute/tpu-sft-dev-data", "deviceName": "tpu-sft-data", "mode": "READ_WRITE"}
    ]
    # A separately declared disk is attached, not created by the VM: deleting the VM leaves it.
    assert disk.urn in vm.dependencies


def test_a_stack_that_does_not_say_deletes_the_disk_with_the_stack(mock_stack):
    assert mock_stack(remove=("tpu-sft:keepDataDisk",)).one(DISK).retain_on_delete is False


def test_keep_data_disk_retains_it(mock_stack):
    disk = mock_stack({"tpu-sft:keepDataDisk": "true"}).one(DISK)
    assert disk.retain_on_delete is True


def test_components_and_parents(mock_stack):
    stack = mock_stack()
    components = {r.type: r for r in stack.resources if r.type.startswith("tpu-sft:infra:")}
    assert set(components) == {
        "tpu-sft:infra:DataDisk",
        "tpu-sft:infra:SshFirewall",
        "tpu-sft:infra:TpuVm",
        "tpu-sft:infra:PostDeployTasks",
        "tpu-sft:infra:AutostopAccess",
        "tpu-sft:infra:Bucket",
    }
    for bucket_part in [
        *stack.of_type("gcp:storage/bucket:Bucket"),
        *stack.of_type("gcp:storage/bucketIAMMember:BucketIAMMember"),
    ]:
        assert bucket_part.parent == components["tpu-sft:infra:Bucket"].urn
    assert stack.one(DISK).parent == components["tpu-sft:infra:DataDisk"].urn
    assert {r.parent for r in stack.of_type(FIREWALL)} == {components["tpu-sft:infra:SshFirewall"].urn}
    assert stack.one(INSTANCE).parent == components["tpu-sft:infra:TpuVm"].urn
    for r in stack.resources:
        assert r.protect is False  # `pulumi destroy` must be able to remove everything
        # No resource option hides a change from the diff. A command is replaced (re-run) when its triggers change,
        # which pulumi-command itself declares; the VM is replaced, old one first, where the provider would stop
        # it (tests/infra/resources/test_vm.py); nothing else changes how a replacement happens.
        if r.type == INSTANCE:
            assert (r.delete_before_replace, r.ignore_changes) == (True, [])
            continue
        replaced_on = ["triggers[*]"] if r.type == "command:local:Command" else []
        assert (r.delete_before_replace, r.ignore_changes, r.replace_on_changes) == (False, [], replaced_on)
