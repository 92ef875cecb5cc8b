"""The managed-group stand-in (rehearsal/managed_group.py) over what the program declares: a Spot VM's group of one
is repaired with its name and data disk after a preemption or a deletion, never at size 0, and comes back when a
`pulumi up` sets its size again; a slice's group leaves an ended host ended; the rules refuse what Google refuses."""

import pytest

from rehearsal import group_rules
from rehearsal.managed_group import ManagedGroup, Refused

GROUP = "gcp:compute/instanceGroupManager:InstanceGroupManager"
TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
SPOT = {"tpu-sft:provisioningModel": "SPOT"}


@pytest.fixture
def spot_group(mock_stack):
    stack = mock_stack(SPOT, remove=("tpu-sft:reservation",))
    return ManagedGroup.declared(stack.one(GROUP).inputs, stack.one(TEMPLATE).inputs), stack.outputs


def test_a_preempted_vm_comes_back_with_its_name_a_new_boot_disk_and_its_data_disk(spot_group):
    group, outputs = spot_group
    [before] = group.vms.values()
    assert before.name == outputs["instanceName"] == "tpu-sft-dev-01"
    assert before.disks == (outputs["dataDiskName"],)
    group.preempt(before.name)
    after = group.vms[before.name]
    assert after.instance_id != before.instance_id and after.boot_disk != before.boot_disk
    assert after.disks == before.disks and group.lost_disks == []
    group.preempt(after.name)  # a second preemption, or a deletion by hand: the same
    assert group.vms[before.name].disks == before.disks and len(group.vms) == 1


def test_at_size_0_nothing_is_repaired_and_a_later_up_brings_the_vm_back(spot_group):
    group, _ = spot_group
    [vm] = group.vms.values()
    group.resize(0)  # autostop, once idle
    assert group.vms == {} and group.lost_disks == []
    group.resize(0)
    assert group.vms == {}
    group.resize(1)  # the next `pulumi up`: refresh reads the 0, the update declares 1
    assert group.vms[vm.name].disks == vm.disks and group.vms[vm.name].instance_id != vm.instance_id


def test_a_group_that_does_not_keep_the_disk_loses_it_on_recreation(spot_group):
    group, outputs = spot_group
    template = {**group.template, "disks": [{**d, "autoDelete": True} for d in group.template["disks"]]}
    careless = ManagedGroup("g", "g-##", template, 1, repairs=True, kept_devices=frozenset())
    careless.resize(1)
    careless.preempt("g-01")
    assert careless.lost_disks == [outputs["dataDiskName"]]


def test_a_slice_leaves_an_ended_host_ended(slice_stack):
    stack = slice_stack()
    group = ManagedGroup.declared(stack.one(GROUP).inputs, stack.one(TEMPLATE).inputs, has_topology=True)
    assert sorted(group.vms) == ["tpu-sft-dev-01", "tpu-sft-dev-02", "tpu-sft-dev-03", "tpu-sft-dev-04"]
    group.preempt("tpu-sft-dev-02")
    assert sorted(group.vms) == ["tpu-sft-dev-01", "tpu-sft-dev-03", "tpu-sft-dev-04"]


def test_bulk_mode_with_a_spot_template_and_the_start_of_a_stopped_tpu_vm_are_refused(spot_group):
    group, _ = spot_group
    bulk = {"name": "g", "baseInstanceName": "g-##", "targetSize": 1, "targetSizePolicies": [{"mode": "BULK"}]}
    with pytest.raises(Refused, match="RESERVATION_BOUND or FLEX_START"):
        ManagedGroup.declared(bulk, group.template)
    reservation_bound = {**group.template, "scheduling": {"provisioningModel": "RESERVATION_BOUND"}}
    assert len(ManagedGroup.declared(bulk, reservation_bound).vms) == 1
    with pytest.raises(Refused, match="cannot be restarted"):
        group.start("tpu-sft-dev-01")


def test_the_mock_engine_refuses_a_spot_group_of_one_in_bulk_but_not_a_spot_slice(spot_group):
    group, _ = spot_group
    templates = {"t": group.template}
    bulk = {"versions": [{"instanceTemplate": "t"}], "targetSizePolicies": [{"mode": "BULK"}]}
    with pytest.raises(group_rules.GroupRefused, match="RESERVATION_BOUND or FLEX_START"):
        group_rules.refuse_bulk_without_its_models(bulk, {}, templates)
    policies = {"p": {"workloadPolicy": {"acceleratorTopology": "4x4"}}}
    group_rules.refuse_bulk_without_its_models(
        {**bulk, "resourcePolicies": {"workloadPolicy": "p"}}, policies, templates
    )
