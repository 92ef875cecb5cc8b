"""A VM that Google or a person stopped (host maintenance, a stop from the console or gcloud, a spot VM's STOP) is
replaced by the next `pulumi up`, never started: Compute Engine cannot restart an instance with TPUs attached
("Stop or restart a Compute Engine instance", Limitations, read 2026-12-05; the stand-in refuses the start as
Google does, tests/workload/gce_standin.py). The refresh, the engine's step and the provider's calls are played as
their sources say (tests/infra/resources/status_refresh.py) on what the program declares under the mock engine."""

from __future__ import annotations

import dataclasses

import pytest

from infra.resources.vm import REPLACED_WHEN_STOPPED
from tests.infra.resources.status_refresh import ProviderError, Step, up
from tests.workload.gce_standin import GceStandin

INSTANCE = "gcp:compute/instance:Instance"


@pytest.fixture
def vm(mock_stack):
    return mock_stack().one(INSTANCE)


@pytest.fixture
def google(vm):
    """Compute Engine holding the declared VM, running until a test says otherwise."""
    standin = GceStandin(
        instance=vm.inputs["name"], zone=vm.inputs["zone"], machine_type=vm.inputs["machineType"]
    ).start()
    yield standin
    standin.stop()


def calls(standin: GceStandin) -> list[tuple[str, str]]:
    return [(method, path.rsplit("/", 1)[-1]) for method, path, _ in standin.calls]


def test_the_vm_declares_its_status_and_is_replaced_when_it_differs(vm):
    assert vm.inputs["desiredStatus"] == "RUNNING"
    assert REPLACED_WHEN_STOPPED == "desiredStatus" and REPLACED_WHEN_STOPPED in vm.replace_on_changes
    assert vm.delete_before_replace  # its name and the data disk it holds read-write are the new VM's


@pytest.mark.parametrize("status", ["TERMINATED", "SUSPENDED", "STOPPING"])
def test_a_stopped_vm_is_replaced_not_started(vm, google, status):
    google.status = status
    assert up(vm, google) == Step("replace", status)
    assert calls(google) == [("GET", "tpu-sft-dev"), ("DELETE", "tpu-sft-dev")]  # no start: Google would refuse it
    assert up(vm, google) == Step("same", "RUNNING")  # the new VM: nothing more to do


def test_a_running_vm_is_left_alone(vm, google):
    assert up(vm, google) == Step("same", "RUNNING")
    assert calls(google) == [("GET", "tpu-sft-dev")]


def test_declared_without_the_replacement_the_provider_starts_it_and_google_refuses(vm, google):
    """What the program declared before: `desired_status` alone. After the refresh the provider starts the VM, and
    every later `pulumi up` fails the same way."""
    google.status = "TERMINATED"
    before = dataclasses.replace(vm, replace_on_changes=[p for p in vm.replace_on_changes if p != "desiredStatus"])
    for _ in range(2):
        with pytest.raises(ProviderError) as refused:
            up(before, google)
        assert str(refused.value) == (
            "Error starting instance: googleapi: Error 400: Instance tpu-sft-dev (ct6e-standard-8t) has TPUs attached "
            "and cannot be restarted: TPU instances can only be deleted once stopped."
        )
    assert google.status == "TERMINATED"


def test_the_standin_starts_a_stopped_vm_without_tpus(vm):
    """The refusal is the TPU's: the same start of a machine type without TPUs runs the VM again."""
    standin = GceStandin(instance=vm.inputs["name"], machine_type="n2-standard-8", status="TERMINATED").start()
    try:
        before = dataclasses.replace(vm, replace_on_changes=[])
        assert up(before, standin) == Step("update", "TERMINATED")
        assert standin.status == "RUNNING" and ("POST", "start") in calls(standin)
    finally:
        standin.stop()
