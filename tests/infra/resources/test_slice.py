"""A multi-host slice, as the real program declares it under the mock engine, field by field: the workload
policy, the instance template (each host is the single VM in every fact it can be), the managed instance group,
the firewall, and what a slice does not get (a VM, a data disk, autostop's grant); with FLEX_START, the empty group
and the resize request that fills it. Its tasks: tests/infra/resources/test_slice_tasks.py."""

import pytest

from infra.resources.startup import WATCHER_PATH
from rehearsal import group_rules
from rehearsal.engine import DEFAULT_COMPUTE_ACCOUNT
from tests.fixtures.mock_engine import DISK_KEYS

POLICY = "gcp:compute/resourcePolicy:ResourcePolicy"
TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
GROUP = "gcp:compute/instanceGroupManager:InstanceGroupManager"
RESIZE_REQUEST = "gcp:compute/resizeRequest:ResizeRequest"
INSTANCE = "gcp:compute/instance:Instance"
FIREWALL = "gcp:compute/firewall:Firewall"
IMAGE = "ubuntu-os-accelerator-images/ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e"
AFFINITY = {
    "type": "SPECIFIC_RESERVATION",
    "specificReservation": {"key": "compute.googleapis.com/reservation-name", "values": ["my-v6e-reservation"]},
}
CAP = {"seconds": 4 * 3600}  # the derived default cap, as on the single VM (tests/infra/pricing/test_run_cap.py)

# (provisioning model, reservation, the template's scheduling, its reservation affinity): the single VM's
# cases of tests/infra/resources/test_vm.py, with the default cap on (none for RESERVATION_BOUND: its hosts end with
# the reservation, infra/pricing/run_cap.py).
MODELS = [
    (
        "RESERVATION_BOUND",
        "my-v6e-reservation",
        {
            "provisioningModel": "RESERVATION_BOUND",
            "onHostMaintenance": "TERMINATE",
            "instanceTerminationAction": "DELETE",
        },
        AFFINITY,
    ),
    (
        "STANDARD",
        "my-v6e-reservation",
        {
            "provisioningModel": "STANDARD",
            "onHostMaintenance": "TERMINATE",
            "instanceTerminationAction": "DELETE",
            "maxRunDuration": CAP,
        },
        AFFINITY,
    ),
    (
        "STANDARD",
        None,
        {
            "provisioningModel": "STANDARD",
            "onHostMaintenance": "TERMINATE",
            "instanceTerminationAction": "DELETE",
            "maxRunDuration": CAP,
        },
        None,
    ),
    (
        "SPOT",
        None,
        {
            "provisioningModel": "SPOT",
            "onHostMaintenance": "TERMINATE",
            "instanceTerminationAction": "DELETE",
            "automaticRestart": False,
            "preemptible": True,
            "maxRunDuration": CAP,
        },
        None,
    ),
    # the single VM's FLEX_START scheduling; no reservation, as in the provider's example for resize requests
    (
        "FLEX_START",
        None,
        {
            "provisioningModel": "FLEX_START",
            "onHostMaintenance": "TERMINATE",
            "instanceTerminationAction": "DELETE",
            "automaticRestart": False,
            "maxRunDuration": CAP,
        },
        {"type": "NO_RESERVATION"},
    ),
]
MODEL_IDS = ["reservation-bound", "standard-reserved", "standard", "spot", "flex-start"]
SHAPES = [("v6e-16", "4x4", 4), ("v6e-256", "16x16", 64)]


@pytest.mark.parametrize(("accelerator", "topology", "hosts"), SHAPES, ids=[s[0] for s in SHAPES])
@pytest.mark.parametrize(("model", "reservation", "scheduling", "affinity"), MODELS, ids=MODEL_IDS)
def test_slice_declarations_field_by_field(
    slice_stack, accelerator, topology, hosts, model, reservation, scheduling, affinity
):
    overrides = {"tpu-sft:provisioningModel": model}
    if reservation:
        overrides["tpu-sft:reservation"] = reservation
    stack = slice_stack(accelerator, overrides, remove=() if reservation else ("tpu-sft:reservation",))

    policy = stack.one(POLICY)
    assert policy.inputs == {
        "region": "us-east5",
        "description": f"tpu-sft: the {accelerator} slice's hosts as one {topology} topology",
        "workloadPolicy": {"type": "HIGH_THROUGHPUT", "acceleratorTopology": topology},
    }

    template = stack.one(TEMPLATE)
    inputs = dict(template.inputs)
    metadata = inputs.pop("metadata")
    assert inputs == {
        "machineType": "ct6e-standard-4t",
        "tags": ["tpu-sft-dev"],
        "labels": {"app": "tpu-sft", "stack": "dev", "owner": "ml-platform", "cost-center": "research"},
        "disks": [
            {
                "boot": True,
                "autoDelete": True,
                "sourceImage": IMAGE,
                "diskSizeGb": 200,
                "diskType": "hyperdisk-balanced",
            }
        ],
        "networkInterfaces": [{"network": "default", "accessConfigs": [{}]}],
        "serviceAccount": {"scopes": ["https://www.googleapis.com/auth/cloud-platform"]},
        "scheduling": scheduling,
        **({"reservationAffinity": affinity} if affinity else {}),
    }
    assert sorted(metadata) == [
        "enable-oslogin",
        "ssh-keys",
        "startup-script",
        "tpu-sft-autostop",
        "tpu-sft-autostop-reports",
        "tpu-sft-idle-minutes",
        "tpu-sft-slice-group",
        "tpu-sft-slice-hosts",
        "tpu-sft-usd-per-chip-hour",
    ]
    # A flex-start slice takes no autostop (its hosts end with their resize request); every other one is resized to 0.
    autostop = "off" if model == "FLEX_START" else "delete"
    assert (metadata["enable-oslogin"], metadata["tpu-sft-autostop"]) == ("FALSE", autostop)
    # What each host's autostop needs to agree with the others (workload/spend/autostop.py): the group, every host, and
    # where in the bucket they report.
    assert metadata["tpu-sft-slice-group"] == "tpu-sft-dev"
    assert metadata["tpu-sft-slice-hosts"].split(",") == [f"tpu-sft-dev-{n:02d}" for n in range(1, hosts + 1)]
    assert metadata["tpu-sft-autostop-reports"] == "gs://my-tpu-project-tpu-sft-dev-runs/autostop"
    assert metadata["ssh-keys"].startswith("tpu-sft:ssh-ed25519 ")

    group = stack.one(GROUP)
    flex = model == "FLEX_START"
    assert group.inputs == {
        "name": "tpu-sft-dev",
        "baseInstanceName": "tpu-sft-dev-##",  # hosts tpu-sft-dev-01, -02, …
        "zone": "us-east5-b",
        "versions": [{"instanceTemplate": "https://compute/instanceTemplates/tpu-sft-dev-template?uniqueId=1"}],
        "resourcePolicies": {"workloadPolicy": "https://compute/resourcePolicies/tpu-sft-dev-workload"},
        "targetSizePolicies": [{"mode": "BULK"}],  # all hosts at once: Compute Engine refuses a TPU group without
        "instanceLifecyclePolicy": {"defaultActionOnFailure": "DO_NOTHING"},
        "updatePolicy": {"type": "OPPORTUNISTIC", "minimalAction": "REPLACE"},
        **(
            {  # empty: its first task resizes it (remote/pipeline/capacity.py); nothing to wait for until then
                "targetSize": 0,
                "waitForInstances": False,
                "description": f"tpu-sft: the {accelerator} slice, {hosts} flex-start hosts made at once, "
                "each for at most 4 h",
            }
            if flex
            else {
                "targetSize": hosts,
                "waitForInstances": True,
                "waitForInstancesStatus": "STABLE",
            }
        ),
    }
    assert template.urn in group.dependencies and policy.urn in group.dependencies
    # A refresh reads back the size the first task set; another run cap replaces the group, the old one deleted first.
    assert group.ignore_changes == (["targetSize"] if flex else [])
    assert (group.replace_on_changes, group.delete_before_replace) == (
        ["description", "resourcePolicies.workloadPolicy", "targetSizePolicies"],
        True,
    )
    # The provider's default is 15 min for each (and its wait for STABLE counts against create's, even on an
    # update); a 64-host slice is given longer, and a slice Google cannot fill still fails in bounded time.
    assert group.custom_timeouts == {"create": "30m", "update": "30m", "delete": "30m"}

    assert stack.of_type(RESIZE_REQUEST) == []  # Compute Engine refuses them in a TPU group (rehearsal/group_rules.py)


def test_each_host_gets_what_the_single_vm_gets(mock_stack, slice_stack):
    """Same ssh-keys, price and autostop metadata; the same startup script without the data disk's mount; the same
    scheduling for the same settings."""
    single = mock_stack().one(INSTANCE).inputs
    host = slice_stack().one(TEMPLATE).inputs
    assert host["scheduling"] == single["scheduling"]
    assert host["reservationAffinity"] == single["reservationAffinity"]
    assert host["serviceAccount"] == single["serviceAccount"]
    assert host["labels"] == single["labels"] and host["tags"] == single["tags"]
    assert host["networkInterfaces"] == single["networkInterfaces"]
    for key in ("ssh-keys", "enable-oslogin", "tpu-sft-autostop", "tpu-sft-idle-minutes", "tpu-sft-usd-per-chip-hour"):
        assert host["metadata"][key] == single["metadata"][key], key
    script, vm_script = host["metadata"]["startup-script"], single["metadata"]["startup-script"]
    assert script.startswith("#!/bin/bash\nset -euo pipefail\ninstall -d -m 755 /var/lib/tpu-sft\n")  # the resumer
    assert "/dev/disk/by-id/google-tpu-sft-data" not in script and "mount -o" not in script  # a host has no data disk
    assert vm_script.endswith(script.split("\n", 2)[2])  # the rest is the VM's script, byte for byte
    assert WATCHER_PATH in script


def test_a_slice_has_no_vm_data_disk_and_its_autostop_grant_is_one_permission_on_the_project(slice_stack):
    stack = slice_stack("v6e-32")
    types = {r.type for r in stack.resources}
    assert INSTANCE not in types
    assert "gcp:compute/disk:Disk" not in types
    assert "gcp:compute/instanceIAMMember:InstanceIAMMember" not in types
    (role,) = stack.of_type("gcp:projects/iAMCustomRole:IAMCustomRole")
    assert role.inputs["permissions"] == [
        "compute.instanceGroupManagers.update"
    ]  # what instanceGroupManagers.resize needs
    (binding,) = stack.of_type("gcp:projects/iAMMember:IAMMember")
    assert binding.inputs == {
        "project": "my-tpu-project",
        "role": f"projects/my-tpu-project/roles/{role.inputs['roleId']}",
        "member": "serviceAccount:123456789012-compute@developer.gserviceaccount.com",
    }  # no condition: IAM Conditions cannot name a group (infra/resources/autostop.py)
    assert "autostop" not in {r.name for r in slice_stack("v6e-32", {"tpu-sft:autostop": "off"}).resources}


def test_what_pulumi_preview_declares_for_v6e_32(slice_stack):
    """The list docs/slices.md shows under "What `pulumi preview` would show"."""
    assert sorted((r.type, r.name) for r in slice_stack("v6e-32").resources) == [
        ("command:local:Command", "tpu-sft-dev-apis-ready"),
        ("command:local:Command", "tpu-sft-dev-pipeline-bootstrap"),
        ("command:local:Command", "tpu-sft-dev-pipeline-convert"),
        ("command:local:Command", "tpu-sft-dev-pipeline-eval"),
        ("command:local:Command", "tpu-sft-dev-pipeline-export"),
        ("command:local:Command", "tpu-sft-dev-pipeline-run"),
        ("command:local:Command", "tpu-sft-dev-pipeline-train"),
        ("gcp:compute/firewall:Firewall", "tpu-sft-dev-slice"),
        ("gcp:compute/firewall:Firewall", "tpu-sft-dev-ssh"),
        ("gcp:compute/firewall:Firewall", "tpu-sft-dev-ssh-deny-other"),
        ("gcp:compute/instanceGroupManager:InstanceGroupManager", "tpu-sft-dev"),
        ("gcp:compute/instanceTemplate:InstanceTemplate", "tpu-sft-dev-template"),
        ("gcp:compute/resourcePolicy:ResourcePolicy", "tpu-sft-dev-workload"),
        ("gcp:projects/iAMCustomRole:IAMCustomRole", "tpu-sft-dev-autostop-role"),
        ("gcp:projects/iAMMember:IAMMember", "tpu-sft-dev-autostop-binding"),
        ("gcp:projects/service:Service", "tpu-sft-dev-api-compute"),
        ("gcp:projects/service:Service", "tpu-sft-dev-api-iam"),
        ("gcp:projects/service:Service", "tpu-sft-dev-api-storage"),
        ("gcp:projects/service:Service", "tpu-sft-dev-api-storage-api"),
        ("gcp:storage/bucket:Bucket", "tpu-sft-dev-runs"),
        ("gcp:storage/bucketIAMMember:BucketIAMMember", "tpu-sft-dev-runs-bucket-reader-0"),
        ("gcp:storage/bucketIAMMember:BucketIAMMember", "tpu-sft-dev-runs-object-user-0"),
        ("random:index/randomId:RandomId", "tpu-sft-dev-autostop-role-id"),
        ("tpu-sft:infra:Bucket", "tpu-sft-dev-runs"),
        ("tpu-sft:infra:PostDeployTasks", "tpu-sft-dev-pipeline"),
        ("tpu-sft:infra:SliceAutostopAccess", "tpu-sft-dev-autostop"),
        ("tpu-sft:infra:SliceFirewall", "tpu-sft-dev-slice"),
        ("tpu-sft:infra:SshFirewall", "tpu-sft-dev-ssh"),
        ("tpu-sft:infra:TpuSlice", "tpu-sft-dev"),
    ]


def test_the_ssh_firewall_is_the_single_vms_and_the_slice_talks_only_to_itself(mock_stack, slice_stack):
    stack = slice_stack()
    single = {r.name: r.inputs for r in mock_stack().of_type(FIREWALL)}
    rules = {r.name: r.inputs for r in stack.of_type(FIREWALL)}
    assert rules["tpu-sft-dev-ssh"] == single["tpu-sft-dev-ssh"]  # IAP's range on tcp:22, priority 1000
    assert rules["tpu-sft-dev-ssh-deny-other"] == single["tpu-sft-dev-ssh-deny-other"]  # the deny at 65000
    assert rules["tpu-sft-dev-slice"] == {
        "network": "default",
        "direction": "INGRESS",
        "priority": 1000,  # before the deny (65000); default-allow-internal (65534) never reaches the hosts
        "allows": [{"protocol": "tcp"}, {"protocol": "udp"}, {"protocol": "icmp"}],
        "sourceTags": ["tpu-sft-dev"],
        "targetTags": ["tpu-sft-dev"],
        "description": "tpu-sft: traffic between the hosts of one TPU slice, and from nowhere else",
    }
    assert "sourceRanges" not in rules["tpu-sft-dev-slice"]


def test_the_bucket_is_granted_to_the_hosts_identity(slice_stack):
    members = {m.inputs["member"] for m in slice_stack().of_type("gcp:storage/bucketIAMMember:BucketIAMMember")}
    assert members == {f"serviceAccount:{DEFAULT_COMPUTE_ACCOUNT}"}  # the API's default account, looked up
    own = "tpu-sft-vm@my-tpu-project.iam.gserviceaccount.com"
    stack = slice_stack(overrides={"tpu-sft:serviceAccount": own})
    assert {m.inputs["member"] for m in stack.of_type("gcp:storage/bucketIAMMember:BucketIAMMember")} == {
        f"serviceAccount:{own}"
    }
    assert stack.one(TEMPLATE).inputs["serviceAccount"]["email"] == own


def test_the_bucket_is_the_single_vms(mock_stack, slice_stack):
    single = mock_stack().one("gcp:storage/bucket:Bucket")
    bucket = slice_stack().one("gcp:storage/bucket:Bucket")
    assert bucket.inputs == single.inputs
    kept = slice_stack(overrides={"tpu-sft:keepDataDisk": "true"}).one("gcp:storage/bucket:Bucket")
    assert kept.retain_on_delete  # keepDataDisk keeps the bucket, where a slice's model is to be kept


@pytest.mark.parametrize(("accelerator", "hosts"), [("v6e-16", 4), ("v6e-32", 8), ("v6e-256", 64)])
def test_cost_outputs_are_the_whole_slice(slice_stack, accelerator, hosts):
    out = slice_stack(accelerator).outputs
    assert (out["hosts"], out["chips"]) == (hosts, hosts * 4)
    assert out["hourlyCostUsd"] == pytest.approx(hosts * 4 * 2.70)
    assert out["estimatedRunCostUsd"] == pytest.approx(out["hourlyCostUsd"] * out["estimatedRunHours"], abs=0.01)
    assert (out["instanceGroupName"], out["acceleratorType"]) == ("tpu-sft-dev", accelerator)
    assert out["checkpointsUrl"] == "gs://my-tpu-project-tpu-sft-dev-runs/runs"
    assert "dataDiskName" not in out and "dataDiskMountPoint" not in out


def test_a_flex_start_slice_costs_the_whole_slice_at_the_vms_price(mock_stack, slice_stack):
    """No flex-start discount is assumed, for the VM or a slice: the list price, tpu-sft:pricePerChipHour."""
    flex = {"tpu-sft:provisioningModel": "FLEX_START"}
    vm = mock_stack({**flex, "tpu-sft:autostop": "delete"}, remove=("tpu-sft:reservation",)).outputs
    out = slice_stack("v6e-32", flex, remove=("tpu-sft:reservation",)).outputs
    assert vm["hourlyCostUsd"] == pytest.approx(8 * 2.70)
    assert (out["hosts"], out["chips"], out["hourlyCostUsd"]) == (8, 32, pytest.approx(32 * 2.70))
    assert out["estimatedRunCostUsd"] == pytest.approx(out["hourlyCostUsd"] * out["estimatedRunHours"], abs=0.01)


def test_os_login_on_a_slice(slice_stack):
    stack = slice_stack(
        overrides={"tpu-sft:sshAccess": "oslogin", "tpu-sft:osLoginAccount": "me@example.com"},
        remove=("tpu-sft:sshUser",),
    )
    assert stack.one(TEMPLATE).inputs["metadata"]["enable-oslogin"] == "TRUE"
    assert "ssh-keys" not in stack.one(TEMPLATE).inputs["metadata"]
    assert stack.one("gcp:oslogin/sshPublicKey:SshPublicKey").inputs["user"] == "me@example.com"


def test_no_external_ip_and_a_cap_are_the_single_vms_settings(slice_stack):
    template = (
        slice_stack(
            overrides={"tpu-sft:externalIp": "false", "tpu-sft:maxRunHours": "2", "tpu-sft:bootDiskSizeGb": "300"}
        )
        .one(TEMPLATE)
        .inputs
    )
    assert template["networkInterfaces"] == [{"network": "default", "accessConfigs": []}]
    assert template["scheduling"]["maxRunDuration"] == {"seconds": 7200}
    assert template["disks"][0]["diskSizeGb"] == 300


def test_a_flex_start_slice_caps_each_host_and_its_first_task_fills_the_group(slice_stack):
    """tpu-sft:maxRunHours is each host's own run duration; the target names the group to fill, and its hosts."""
    stack = slice_stack(
        "v6e-32",
        {"tpu-sft:provisioningModel": "FLEX_START", "tpu-sft:maxRunHours": "24"},
        remove=("tpu-sft:reservation",),
    )
    assert stack.one(TEMPLATE).inputs["scheduling"]["maxRunDuration"] == {"seconds": 24 * 3600}
    assert stack.one(GROUP).inputs["description"].endswith("8 flex-start hosts made at once, each for at most 24 h")


def test_a_slice_of_another_size_is_a_new_group_not_a_patched_one(slice_stack, dev_config):
    """Compute Engine refuses a workload policy change on a MIG that has instances ("Workload policy update is not
    allowed when the MIG has instances.", terraform-provider-google's own acceptance test
    TestAccInstanceGroupManager_addingResourcePoliciesToMigWithNonZeroTargetSize_fails); the provider patches the
    policy in place unless it is removed. Another size is another topology, so another (auto-named, hence newly
    linked) policy: the group must be replaced on that link, its old hosts deleted before the new group exists."""
    small, large = (slice_stack(accelerator) for accelerator in ("v6e-16", "v6e-32"))
    policies = [stack.one(POLICY) for stack in (small, large)]
    assert [p.inputs["workloadPolicy"]["acceleratorTopology"] for p in policies] == ["4x4", "4x8"]
    assert all("name" not in p.inputs for p in policies)  # a new topology is a new policy with a new link
    group = large.one(GROUP)
    assert group.inputs["resourcePolicies"] == {
        "workloadPolicy": f"https://compute/resourcePolicies/{policies[1].name}"
    }
    assert "resourcePolicies.workloadPolicy" in group.replace_on_changes and group.delete_before_replace

    # New hosts: `python -m infra.plan` says every phase re-runs on them.
    from infra.config.read_settings import parse
    from infra.plan.reruns import plan

    base = {k: v for k, v in dev_config.items() if k not in DISK_KEYS} | {"tpu-sft:autostop": "off"}
    rows = plan(*(parse(base | {"tpu-sft:acceleratorType": a}, stack="dev") for a in ("v6e-16", "v6e-32")))
    assert {(reruns, why) for _, reruns, why in rows} == {
        (True, 'the hosts change: `tpu-sft:acceleratorType`: "v6e-16" → "v6e-32"')
    }


def test_the_stand_in_refuses_a_tpu_group_that_does_not_make_its_hosts_at_once():
    """What the mock engine answers for a group whose workload policy has an accelerator topology (the slice's,
    before the program set BULK: this refusal is how the stand-in caught it)."""
    policies = {"https://compute/resourcePolicies/p": {"workloadPolicy": {"acceleratorTopology": "4x4"}}}
    group = {"resourcePolicies": {"workloadPolicy": "https://compute/resourcePolicies/p"}}
    for modes in ([], [{"mode": "INDIVIDUAL"}]):
        with pytest.raises(group_rules.GroupRefused, match="require BULK mode in target size policy"):
            group_rules.refuse_a_tpu_group_not_in_bulk({**group, "targetSizePolicies": modes}, policies)
    group_rules.refuse_a_tpu_group_not_in_bulk({**group, "targetSizePolicies": [{"mode": "BULK"}]}, policies)
    group_rules.refuse_a_tpu_group_not_in_bulk({"resourcePolicies": {}}, policies)  # no topology: any mode


def test_the_stand_in_refuses_a_resize_request_in_a_group_of_tpu_vms():
    """What the mock engine answers for the resize request this program declared for a flex-start slice before it
    filled the group with a plain resize (this refusal is how the stand-in shows it would never have run)."""
    link = "https://compute/instanceTemplates/t?uniqueId=1"
    group = {"versions": [{"instanceTemplate": link}]}
    request = {"instanceGroupManager": "tpu-sft-dev", "resizeBy": 4}
    with pytest.raises(group_rules.GroupRefused, match="resize requests for managed instance group with TPU"):
        group_rules.refuse_a_resize_request_in_a_tpu_group(
            request, {"tpu-sft-dev": group}, {link: {"machineType": "ct6e-standard-4t"}}
        )
    group_rules.refuse_a_resize_request_in_a_tpu_group(  # a group of other VMs may take one
        request, {"tpu-sft-dev": group}, {link: {"machineType": "a3-highgpu-8g"}}
    )
