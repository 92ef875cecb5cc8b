"""The declared VM is the seed's `gcloud compute instances create`, flag by flag."""

from types import SimpleNamespace

import pytest

from infra.resources.vm import _service_account_email

INSTANCE = "gcp:compute/instance:Instance"


@pytest.fixture
def vm(mock_stack):
    return mock_stack().one(INSTANCE)


@pytest.mark.parametrize("account", [None, SimpleNamespace(email=""), SimpleNamespace(email=None)])
def test_a_vm_reporting_no_service_account_email_is_an_error_not_an_empty_identity(account):
    """Autostop binds its one permission to this e-mail: an empty one must stop the program, not bind nothing."""
    with pytest.raises(ValueError, match="no service account.*tpu-sft:serviceAccount"):
        _service_account_email(account)
    own = "vm@p.iam.gserviceaccount.com"
    assert _service_account_email(SimpleNamespace(email=own)) == own


def test_machine_type_and_zone(vm):
    assert vm.inputs["machineType"] == "ct6e-standard-8t"  # --machine-type
    assert vm.inputs["zone"] == "us-east5-b"  # --zone
    assert vm.inputs["name"] == "tpu-sft-dev"


def test_image_and_boot_disk(vm):
    boot = vm.inputs["bootDisk"]
    # --image-project=ubuntu-os-accelerator-images --image-family=ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e
    assert boot["initializeParams"]["image"] == "ubuntu-os-accelerator-images/ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e"
    assert boot["initializeParams"]["size"] == 200  # --boot-disk-size=200GB
    assert boot["autoDelete"] is True
    assert boot["initializeParams"]["type"] == "hyperdisk-balanced"  # v6e boots from Hyperdisk only


def test_service_account_with_cloud_platform_scope(mock_stack):
    """As the seed's gcloud: the project's default compute service account (no e-mail given), scope cloud-platform
    so that its IAM roles alone decide what the workload may reach; or the stack's own account."""
    scopes = ["https://www.googleapis.com/auth/cloud-platform"]
    assert mock_stack().one(INSTANCE).inputs["serviceAccount"] == {"scopes": scopes}
    own = "tpu-sft-vm@my-tpu-project.iam.gserviceaccount.com"
    vm = mock_stack({"tpu-sft:serviceAccount": own}).one(INSTANCE)
    assert vm.inputs["serviceAccount"] == {"email": own, "scopes": scopes}


def test_scheduling_is_reservation_bound(vm):
    assert vm.inputs["scheduling"] == {
        "onHostMaintenance": "TERMINATE",  # --maintenance-policy=TERMINATE
        "instanceTerminationAction": "DELETE",  # --instance-termination-action=DELETE
        "provisioningModel": "RESERVATION_BOUND",  # --provisioning-model=RESERVATION_BOUND
        # and, as the seed, no run cap: the VM ends with its reservation (tests/infra/pricing/test_run_cap.py)
    }


@pytest.mark.parametrize(
    ("model", "reservation", "scheduling", "affinity"),
    [
        # A calendar-mode (future) reservation: the seed's --provisioning-model=RESERVATION_BOUND.
        (
            "RESERVATION_BOUND",
            "my-v6e-reservation",
            {
                "provisioningModel": "RESERVATION_BOUND",
                "onHostMaintenance": "TERMINATE",
                "instanceTerminationAction": "DELETE",
            },
            {
                "type": "SPECIFIC_RESERVATION",
                "specificReservation": {
                    "key": "compute.googleapis.com/reservation-name",
                    "values": ["my-v6e-reservation"],
                },
            },
        ),
        # An ordinary specific reservation: consumed by a STANDARD VM with SPECIFIC_RESERVATION affinity.
        (
            "STANDARD",
            "projects/other-project/reservations/v6e-shared",
            {"provisioningModel": "STANDARD", "onHostMaintenance": "TERMINATE"},
            {
                "type": "SPECIFIC_RESERVATION",
                "specificReservation": {
                    "key": "compute.googleapis.com/reservation-name",
                    "values": ["projects/other-project/reservations/v6e-shared"],
                },
            },
        ),
        ("STANDARD", None, {"provisioningModel": "STANDARD", "onHostMaintenance": "TERMINATE"}, None),
    ],
)
def test_reservations_by_kind(mock_stack, model, reservation, scheduling, affinity):
    # caps: test_run_cap.py; the group of one that recreates a SPOT or STANDARD VM: test_vm_group.py
    overrides = {"tpu-sft:provisioningModel": model, "tpu-sft:maxRunHours": "off", "tpu-sft:recovery": "off"}
    if reservation:
        overrides["tpu-sft:reservation"] = reservation
    vm = mock_stack(overrides, remove=() if reservation else ("tpu-sft:reservation",)).one(INSTANCE)
    assert vm.inputs["scheduling"] == scheduling
    assert vm.inputs.get("reservationAffinity") == affinity


def test_reservation_affinity_is_specific(vm):
    # --reservation-affinity=specific --reservation=NAME
    assert vm.inputs["reservationAffinity"] == {
        "type": "SPECIFIC_RESERVATION",
        "specificReservation": {"key": "compute.googleapis.com/reservation-name", "values": ["my-v6e-reservation"]},
    }


def test_network_and_tag(vm):
    # --network=default --tags=NAME; an external IP for egress, as gcloud gives by default
    assert vm.inputs["networkInterfaces"] == [{"network": "default", "accessConfigs": [{}]}]
    assert vm.inputs["tags"] == ["tpu-sft-dev"]


def test_labels(vm):
    assert vm.inputs["labels"] == {"app": "tpu-sft", "stack": "dev", "owner": "ml-platform", "cost-center": "research"}
    # Boot disk labels would be ForceNew in pulumi-gcp: a label edit must not replace the VM.
    assert "labels" not in vm.inputs["bootDisk"]["initializeParams"]


def test_ssh_public_key_in_metadata_and_no_private_key(mock_stack, gcloud_home):
    stack = mock_stack()
    metadata = stack.one(INSTANCE).inputs["metadata"]
    public = (gcloud_home / ".ssh/google_compute_engine.pub").read_text().strip()
    assert metadata["ssh-keys"] == f"tpu-sft:{public}"
    assert metadata["enable-oslogin"] == "FALSE"
    private = (gcloud_home / ".ssh/google_compute_engine").read_text()
    body = "".join(private.splitlines()[1:-1])
    for r in stack.resources:
        assert body[:40] not in repr(r.inputs)
    assert body[:40] not in repr(stack.outputs)


def test_startup_script_mounts_the_data_disk(vm):
    script = vm.inputs["metadata"]["startup-script"]
    assert "/dev/disk/by-id/google-tpu-sft-data" in script
    assert "blkid" in script  # formats only a blank disk: a kept disk's data survives a new VM
    assert "mount -o discard,defaults /dev/disk/by-id/google-tpu-sft-data /mnt/tpu-sft-data" in script


@pytest.mark.parametrize(
    ("model", "extra", "expected"),
    [
        (
            "SPOT",
            {},
            {
                "provisioningModel": "SPOT",
                "onHostMaintenance": "TERMINATE",
                "instanceTerminationAction": "DELETE",
                "automaticRestart": False,
                "preemptible": True,
            },
        ),
        (
            "FLEX_START",
            {"tpu-sft:maxRunHours": "4"},
            {
                "provisioningModel": "FLEX_START",
                "onHostMaintenance": "TERMINATE",
                "instanceTerminationAction": "DELETE",
                "automaticRestart": False,
                "maxRunDuration": {"seconds": 14400},
            },
        ),
        ("STANDARD", {}, {"provisioningModel": "STANDARD", "onHostMaintenance": "TERMINATE"}),
    ],
)
def test_other_provisioning_models(mock_stack, model, extra, expected):
    stack = mock_stack(
        {"tpu-sft:provisioningModel": model, "tpu-sft:maxRunHours": "off", "tpu-sft:recovery": "off", **extra},
        remove=("tpu-sft:reservation",),
    )
    vm = stack.one(INSTANCE)
    assert vm.inputs["scheduling"] == expected
    # A flex-start VM names no reservation outright (tests/infra/resources/test_flex_start_vm.py); the others leave it
    # unset.
    affinity = {"type": "NO_RESERVATION"} if model == "FLEX_START" else None
    assert vm.inputs.get("reservationAffinity") == affinity


def test_run_duration_cap(mock_stack):
    vm = mock_stack({"tpu-sft:maxRunHours": "3"}).one(INSTANCE)
    assert vm.inputs["scheduling"]["maxRunDuration"] == {"seconds": 10800}


def test_a_capped_standard_vm_is_deleted_at_the_cap(mock_stack):
    """Only a cap ends a STANDARD VM; it must then be deleted, not stopped (a stopped VM keeps its disks)."""
    stack = mock_stack(
        {"tpu-sft:provisioningModel": "STANDARD", "tpu-sft:maxRunHours": "2", "tpu-sft:recovery": "off"},
        remove=("tpu-sft:reservation",),
    )
    scheduling = stack.one(INSTANCE).inputs["scheduling"]
    assert (scheduling["instanceTerminationAction"], scheduling["maxRunDuration"]) == ("DELETE", {"seconds": 7200})


def test_changes_the_provider_would_stop_the_vm_for_replace_it_instead(vm):
    """A stopped TPU VM cannot be restarted: machine type, service account and network changes, which the provider
    applies on a stopped VM, replace it (the old one first: its name and its data disk are the new one's)."""
    assert "allowStoppingForUpdate" not in vm.inputs
    assert vm.replace_on_changes == [
        "machineType",
        "serviceAccount",
        "networkInterfaces[*].network",
        "networkInterfaces[*].subnetwork",
    ]  # and `desiredStatus` for a VM found stopped for good: tests/infra/resources/test_stopped_vm.py
    assert vm.delete_before_replace


def test_accelerator_type_picks_machine_type(mock_stack):
    assert mock_stack({"tpu-sft:acceleratorType": "v6e-4"}).one(INSTANCE).inputs["machineType"] == "ct6e-standard-4t"


def test_a_stack_that_does_not_say_gets_an_external_ip_as_gcloud_gives(mock_stack):
    vm = mock_stack(remove=("tpu-sft:externalIp",)).one(INSTANCE)
    assert vm.inputs["networkInterfaces"] == [{"network": "default", "accessConfigs": [{}]}]


def test_no_external_ip_when_asked(mock_stack):
    vm = mock_stack({"tpu-sft:externalIp": "false"}).one(INSTANCE)
    assert vm.inputs["networkInterfaces"] == [{"network": "default", "accessConfigs": []}]
