"""tpu-sft:recovery auto: a SPOT or STANDARD VM is declared as a managed instance group of one, from a template that
carries what the plain VM has, its data disk kept across recreations (infra/resources/vm_group.py); refused in one
line where no group can serve; and an existing stack that moves to it keeps its data disk."""

import json

import pytest
from pulumi import RunError

from policy.catalog import MANDATORY, check_stack
from policy.model import Resource
from rehearsal.engine import Stack, run_program
from workload.core.contract import RESUME_KIT_DIR, TARGET_ENV
from workload.spend import autostop

INSTANCE = "gcp:compute/instance:Instance"
TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
GROUP = "gcp:compute/instanceGroupManager:InstanceGroupManager"
DISK = "gcp:compute/disk:Disk"
GROUP_ROLE_BINDING = "gcp:projects/iAMMember:IAMMember"
INSTANCE_ROLE_BINDING = "gcp:compute/instanceIAMMember:InstanceIAMMember"
SPOT = {"tpu-sft:provisioningModel": "SPOT"}
NO_RESERVATION = ("tpu-sft:reservation",)


@pytest.fixture
def spot_stack(mock_stack):
    return mock_stack(SPOT, remove=NO_RESERVATION)


def test_a_spot_vm_is_a_group_of_one_from_a_template_that_carries_the_vm(spot_stack, mock_stack):
    plain = mock_stack({**SPOT, "tpu-sft:recovery": "off"}, remove=NO_RESERVATION).one(INSTANCE).inputs
    assert spot_stack.of_type(INSTANCE) == []
    template = spot_stack.one(TEMPLATE).inputs
    # What the plain VM has, field by field: machine type, scheduling, labels, tags, service account, network.
    assert template["machineType"] == plain["machineType"] == "ct6e-standard-8t"
    assert template["scheduling"] == plain["scheduling"]
    assert template["scheduling"]["provisioningModel"] == "SPOT"
    assert template["labels"] == plain["labels"] and template["tags"] == plain["tags"]
    assert template["serviceAccount"] == plain["serviceAccount"]
    assert template["networkInterfaces"][0]["network"] == plain["networkInterfaces"][0]["network"]
    boot, data = template["disks"]
    assert boot["sourceImage"] == plain["bootDisk"]["initializeParams"]["image"]
    assert (boot["boot"], boot["autoDelete"], boot["diskSizeGb"]) == (True, True, 200)  # a new boot disk each VM
    # The data disk is attached by name, never deleted with a VM, and mounted by the same startup script.
    assert data == {
        "source": spot_stack.outputs["dataDiskName"],
        "deviceName": "tpu-sft-data",
        "mode": "READ_WRITE",
        "autoDelete": False,
    }
    metadata = template["metadata"]
    # The same startup script, but for its resume step: a new boot disk restores the run from the kit on the data
    # disk, once the guest agent has made the user (tests/remote/pipeline/test_resume_kit.py).
    script, plain_script = metadata["startup-script"].splitlines(), plain["metadata"]["startup-script"].splitlines()
    only_group = [line for line in script if line not in plain_script]
    assert len(only_group) == 3 and all(RESUME_KIT_DIR in line or "id -u tpu-sft" in line for line in only_group)
    assert [line for line in plain_script if line not in script] == [
        line for line in plain_script if "boot_resume.py --jobs-root" in line or line.startswith("if [ -d /home")
    ]
    assert "google-tpu-sft-data" in metadata["startup-script"]
    same = {k: v for k, v in plain["metadata"].items() if k != "startup-script"}
    assert {k: v for k, v in metadata.items() if k in same} == same


def test_the_group_repairs_its_one_vm_keeps_the_disk_and_names_it_stably(spot_stack):
    group = spot_stack.one(GROUP).inputs
    assert group["name"] == "tpu-sft-dev" and group["targetSize"] == 1
    assert group["baseInstanceName"] == "tpu-sft-dev-##"  # its VM: tpu-sft-dev-01, before and after each repair
    assert group["statefulDisks"] == [{"deviceName": "tpu-sft-data", "deleteRule": "NEVER"}]
    assert group["instanceLifecyclePolicy"] == {"defaultActionOnFailure": "REPAIR"}
    assert "targetSizePolicies" not in group  # bulk mode takes only RESERVATION_BOUND and FLEX_START templates
    assert group["updatePolicy"]["replacementMethod"] == "RECREATE"  # a replaced VM keeps its name
    assert spot_stack.outputs["instanceName"] == "tpu-sft-dev-01"
    assert spot_stack.outputs["instanceGroupName"] == "tpu-sft-dev"
    # The tasks reach that name.
    assert "tpu-sft@tpu-sft-dev-01" in str(spot_stack.outputs)


def test_only_the_groups_vm_keeps_a_resume_kit_on_its_data_disk(spot_stack, mock_stack):
    """Every task on a VM the group recreates keeps what a new boot disk resumes from (remote/pipeline/resume_kit.py);
    a plain VM's target is as it was (no task re-runs for it)."""
    plain = mock_stack({**SPOT, "tpu-sft:recovery": "off"}, remove=NO_RESERVATION)
    for stack, kit in ((spot_stack, RESUME_KIT_DIR), (plain, None)):
        targets = [
            json.loads(c.inputs["environment"][TARGET_ENV])
            for c in stack.of_type("command:local:Command")
            if TARGET_ENV in (c.inputs.get("environment") or {})
        ]
        assert targets and all(t["profile"].get("resume_kit") == kit for t in targets)


def test_autostop_resizes_the_group_to_0_with_the_slices_one_permission(spot_stack):
    """Deleting the VM would be repaired: its autostop takes the group path, a group of one host."""
    metadata = spot_stack.one(TEMPLATE).inputs["metadata"]
    assert metadata[autostop.GROUP_KEY] == "tpu-sft-dev"
    assert metadata[autostop.HOSTS_KEY] == "tpu-sft-dev-01"
    assert metadata[autostop.REPORTS_KEY] == "gs://my-tpu-project-tpu-sft-dev-runs/autostop"
    [role] = spot_stack.of_type("gcp:projects/iAMCustomRole:IAMCustomRole")
    assert role.inputs["permissions"] == ["compute.instanceGroupManagers.update"]
    assert spot_stack.of_type(INSTANCE_ROLE_BINDING) == []  # no compute.instances.delete on the VM
    assert len(spot_stack.of_type(GROUP_ROLE_BINDING)) == 1


@pytest.mark.parametrize(
    ("overrides", "remove"),
    [
        (
            {},
            (),
        ),  # the dev stack: RESERVATION_BOUND, which Google's bulk-only rule and the reservation's end leave plain
        ({**SPOT, "tpu-sft:recovery": "off"}, NO_RESERVATION),
        (
            {"tpu-sft:provisioningModel": "FLEX_START", "tpu-sft:maxRunHours": "4"},
            NO_RESERVATION,
        ),
    ],
    ids=["reservation-bound", "spot-off", "flex-start"],
)
def test_where_no_group_serves_the_vm_stays_plain(mock_stack, overrides, remove):
    stack = mock_stack(overrides, remove=remove)
    assert len(stack.of_type(INSTANCE)) == 1 and stack.of_type(GROUP) == []
    assert stack.outputs["instanceName"] == "tpu-sft-dev"


REFUSED = [
    ({"tpu-sft:recovery": "auto"}, (), "tpu-sft:recovery", "RESERVATION_BOUND"),
    (
        {"tpu-sft:recovery": "auto", "tpu-sft:provisioningModel": "FLEX_START", "tpu-sft:maxRunHours": "4"},
        NO_RESERVATION,
        "tpu-sft:recovery",
        "FLEX_START",
    ),
    (
        {"tpu-sft:recovery": "auto", "tpu-sft:acceleratorType": "v6e-16", "tpu-sft:autostop": "off"},
        (),
        "tpu-sft:recovery",
        "slice",
    ),
    ({**SPOT, "tpu-sft:autostop": "off"}, NO_RESERVATION, "tpu-sft:autostop", "bill until `pulumi destroy`"),
    ({"tpu-sft:recovery": "always"}, (), "tpu-sft:recovery", "auto"),
]


@pytest.mark.parametrize(("overrides", "remove", "key", "words"), REFUSED, ids=[r[3] for r in REFUSED])
def test_recovery_where_it_cannot_apply_is_refused_in_one_line_before_anything(
    dev_config, overrides, remove, key, words
):
    config = {k: v for k, v in {**dev_config, **overrides}.items() if k not in remove}
    declared = Stack()
    with pytest.raises(RunError) as raised:
        run_program(config, into=declared)
    message = str(raised.value)
    assert message.startswith(f"{key}:"), message
    assert "\n" not in message and "Fix:" in message and words in message
    assert declared.resources == []


def test_a_stack_that_moves_to_the_group_keeps_its_data_disk(mock_stack):
    """The preview of the move: the VM and its delete grant go, the group, its template and the group grant come, and
    the data disk is the same resource with the same inputs, so the engine neither replaces nor deletes it."""
    before = mock_stack({**SPOT, "tpu-sft:recovery": "off"}, remove=NO_RESERVATION)
    after = mock_stack(SPOT, remove=NO_RESERVATION)
    [disk_before], [disk_after] = before.of_type(DISK), after.of_type(DISK)
    assert disk_before.urn == disk_after.urn and disk_before.inputs == disk_after.inputs
    urns_before = {r.urn for r in before.resources}
    urns_after = {r.urn for r in after.resources}
    gone = {urn.rsplit("::", 1)[1] for urn in urns_before - urns_after}
    came = {urn.rsplit("::", 1)[1] for urn in urns_after - urns_before}
    assert {"tpu-sft-dev", "tpu-sft-dev-autostop-binding"} <= gone  # the VM, and its delete grant
    assert {"tpu-sft-dev-template", "tpu-sft-dev-autostop-binding"} <= came  # the template, the group's grant
    assert any(r.type == GROUP for r in after.resources if r.urn in urns_after - urns_before)


def test_the_group_passes_the_policy_pack_and_a_group_that_drops_the_disk_does_not(spot_stack, dev_config):
    resources = [
        Resource(r.type, r.name, r.inputs, protect=r.protect, retain_on_delete=r.retain_on_delete)
        for r in spot_stack.resources
    ]
    found = check_stack(resources, stack_config={**dev_config, **SPOT})
    assert [v for v in found if v.level == MANDATORY] == []
    group = next(r for r in resources if r.type == GROUP)
    without_disk = Resource(GROUP, group.name, {**group.props, "statefulDisks": []})
    [violation] = [v for v in check_stack([without_disk], stack_config={}) if v.level == MANDATORY]
    assert violation.policy == "slice-hosts-stay-ended"


def test_the_move_waits_until_the_plain_vm_no_longer_holds_the_disk(mock_stack):
    """The engine creates the group before it deletes the VM that left the program, and the group's VM cannot attach
    the disk the plain VM holds read-write: the move is refused in one line, with the order that works."""
    with pytest.raises(RunError) as raised:
        mock_stack(SPOT, remove=NO_RESERVATION, statuses={"tpu-sft-dev": "RUNNING"})
    message = str(raised.value)
    assert message.startswith("tpu-sft:recovery: auto moves the VM into a managed instance group"), message
    assert "\n" not in message and "gcloud compute instances delete tpu-sft-dev --zone us-east5-b" in message
    assert "tpu-sft-dev-01" in message


def test_direct_access_reaches_the_groups_vm_at_its_own_address(mock_stack):
    """The group's VM is read from Compute Engine once the group is stable, its address with it."""
    stack = mock_stack({**SPOT, "tpu-sft:access": "direct"}, remove=NO_RESERVATION)
    assert "tpu-sft@203.0.113.7" in stack.outputs["sshCommand"] and "203.0.113.7" in stack.outputs["target"]


@pytest.mark.parametrize("keep", ["true", "false"])
def test_destroy_removes_group_and_template_and_keeps_the_disk_only_where_asked(mock_stack, keep):
    """Nothing of the group outlives `pulumi destroy`; the data disk is kept as for the plain VM (keepDataDisk), and
    its stateful delete rule NEVER keeps it from being deleted with a VM in between."""
    overrides = {**SPOT, "tpu-sft:keepDataDisk": keep}
    stack = mock_stack(overrides, remove=NO_RESERVATION)
    plain = mock_stack({**overrides, "tpu-sft:recovery": "off"}, remove=NO_RESERVATION)
    for kind in (GROUP, TEMPLATE):
        [made] = stack.of_type(kind)
        assert not made.protect and not made.retain_on_delete
    assert stack.one(DISK).retain_on_delete == plain.one(DISK).retain_on_delete == (keep == "true")
