"""Rules on the TPU VM: a RESERVATION_BOUND VM names its reservation, the boot disk fits MaxText (mandatory),
and a run-duration cap is set (advisory)."""

import pytest

from policy import instance

KEY = "compute.googleapis.com/reservation-name"
IMAGE = "ubuntu-os-accelerator-images/ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e"
RESERVATION = {"type": "SPECIFIC_RESERVATION", "specificReservation": {"key": KEY, "values": ["my-v6e"]}}


def vm(**changes):
    """The VM as the program declares it for the seed (camelCase inputs, as the engine sends them)."""
    props = {
        "machineType": "ct6e-standard-8t",
        "bootDisk": {"initializeParams": {"size": 200, "image": IMAGE}},
        "scheduling": {"provisioningModel": "RESERVATION_BOUND", "onHostMaintenance": "TERMINATE"},
        "reservationAffinity": RESERVATION,
    }
    props.update(changes)
    return props


class TestReservation:
    @pytest.mark.parametrize(
        "props",
        [
            pytest.param(vm(), id="seed"),
            pytest.param(vm(scheduling={"provisioningModel": "SPOT"}, reservationAffinity=None), id="spot-needs-none"),
            pytest.param(vm(scheduling={}, reservationAffinity=None), id="no-provisioning-model"),
        ],
    )
    def test_passes(self, props):
        assert instance.reservation_missing("vm", props) == []

    @pytest.mark.parametrize(
        ("affinity", "problem"),
        [
            pytest.param(None, "affinity is unset", id="no-affinity"),
            pytest.param({"type": "ANY_RESERVATION"}, "affinity is ANY_RESERVATION", id="any-reservation"),
            pytest.param(
                {"type": "SPECIFIC_RESERVATION", "specificReservation": {"key": "other", "values": ["r"]}},
                f"key is not {KEY}",
                id="wrong-key",
            ),
            pytest.param(
                {"type": "SPECIFIC_RESERVATION", "specificReservation": {"key": KEY, "values": []}},
                "names no reservation",
                id="no-values",
            ),
            pytest.param(
                {"type": "SPECIFIC_RESERVATION", "specificReservation": {"key": KEY, "values": [""]}},
                "names no reservation",
                id="empty-name",
            ),
        ],
    )
    def test_fails(self, affinity, problem):
        [message] = instance.reservation_missing("vm", vm(reservationAffinity=affinity))
        assert message.startswith("instance vm is RESERVATION_BOUND but")
        assert problem in message and "tpu-sft:reservation" in message


class TestBootDisk:
    @pytest.mark.parametrize(("size", "minimum"), [(200, 200), (200.0, 200), (500, 200), (100, 100)])
    def test_passes(self, size, minimum):
        props = vm(bootDisk={"initializeParams": {"size": size}})
        assert instance.boot_disk_too_small("vm", props, minimum) == []

    @pytest.mark.parametrize(
        ("boot_disk", "shown"),
        [
            pytest.param({"initializeParams": {"size": 100}}, "100 GB", id="too-small"),
            pytest.param({"initializeParams": {"size": 199.0}}, "199 GB", id="just-below"),
            pytest.param({"initializeParams": {}}, "the image's default (10 GB)", id="size-unset"),
        ],
    )
    def test_fails(self, boot_disk, shown):
        [message] = instance.boot_disk_too_small("vm", vm(bootDisk=boot_disk))
        assert message == (
            f"instance vm's boot disk is {shown}, below the 200 GB MaxText's install and checkpoints need: "
            "pulumi config set tpu-sft:bootDiskSizeGb 200"
        )

    def test_the_minimum_is_a_parameter(self):
        assert instance.boot_disk_too_small("vm", vm(), minimum_gb=300)


class TestRunDuration:
    def test_passes_with_a_cap(self):
        props = vm(scheduling={"provisioningModel": "SPOT", "maxRunDuration": {"seconds": 14400}})
        assert instance.run_duration_uncapped("vm", props) == []

    def test_passes_a_reservation_bound_vm_without_one(self):
        """It ends with its reservation, which bills its whole period whatever the VM does (run_cap.py says where)."""
        assert instance.run_duration_uncapped("vm", vm(scheduling={"provisioningModel": "RESERVATION_BOUND"})) == []

    @pytest.mark.parametrize(
        "scheduling",
        [
            {"provisioningModel": "STANDARD"},
            {"provisioningModel": "SPOT", "maxRunDuration": {"seconds": 0}},
            {"maxRunDuration": {}},
        ],
    )
    def test_fails_without_one(self, scheduling):
        [message] = instance.run_duration_uncapped("vm", vm(scheduling=scheduling))
        assert "instance vm has no run-duration cap" in message and "tpu-sft:maxRunHours" in message
