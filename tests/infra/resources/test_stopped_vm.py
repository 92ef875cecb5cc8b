"""`pulumi up` leaves alone a VM that Google is restarting (host maintenance, a host error, a crash: "Failure recovery
of TPU instances") and replaces, never starts, one stopped for good (a stop from the console or gcloud, its own
shutdown, a Spot or flex-start VM's end): Compute Engine cannot restart an instance with TPUs attached once a person
stopped it ("Stop or restart a Compute Engine instance", Limitations, read 2026-12-05; the stand-in refuses the start
as Google does, tests/workload/gce_standin.py). Which status is which: workload/core/instance_status.py.

Each case runs the program under the mock engine, its read of the VM answering the status the refresh then reads
from the stand-in, and plays the refresh, the engine's step and the provider's calls as their sources say
(tests/infra/resources/status_refresh.py), from a state holding no `desiredStatus` (this program's own) or RUNNING
(the state after a replacement, and every state the program before this one left)."""

from __future__ import annotations

import dataclasses

import pytest

from infra.resources.vm_status import REPLACED_WHEN_STOPPED
from tests.infra.resources.status_refresh import ProviderError, Step, up
from tests.workload.gce_standin import GceStandin
from workload.core.instance_status import AT_REST, COMING_UP, GOING_DOWN

INSTANCE = "gcp:compute/instance:Instance"
PRIORS = (None, "RUNNING")


@pytest.fixture
def program(mock_stack):
    """The VM as the program declares it when its read of the VM (getInstance) answers `status`."""
    name = mock_stack().one(INSTANCE).inputs["name"]
    return lambda status: mock_stack(statuses={name: status}).one(INSTANCE)


@pytest.fixture
def google(mock_stack):
    """Compute Engine holding the declared VM, running until a test says otherwise."""
    vm = mock_stack().one(INSTANCE)
    standin = GceStandin(
        instance=vm.inputs["name"], zone=vm.inputs["zone"], machine_type=vm.inputs["machineType"]
    ).start()
    yield standin
    standin.stop()


def calls(standin: GceStandin) -> list[tuple[str, str]]:
    return [(method, path.rsplit("/", 1)[-1]) for method, path, _ in standin.calls]


def test_a_running_vm_declares_no_status_and_no_status_replaces_it(program):
    vm = program("RUNNING")
    assert "desiredStatus" not in vm.inputs
    assert REPLACED_WHEN_STOPPED not in vm.replace_on_changes
    assert vm.delete_before_replace  # its name and the data disk it holds read-write are the new VM's


@pytest.mark.parametrize("prior", PRIORS)
@pytest.mark.parametrize("status", COMING_UP + GOING_DOWN)
def test_a_vm_google_is_restarting_is_neither_replaced_nor_started(program, google, status, prior):
    google.status = status
    step = up(program(status), prior, google)
    assert step.op != "replace" and step.after is None
    assert calls(google) == [("GET", "tpu-sft-dev")]  # no delete, no start
    google.status = "RUNNING"  # Google has brought it back: nothing to do
    assert up(program("RUNNING"), step.after, google).op == "same"


def test_a_vm_back_before_the_program_reads_it_is_left_alone(program, google):
    """The refresh read it mid-restart, the program's own read a moment later finds it running again."""
    google.status = "STOPPING"
    assert up(program("RUNNING"), "RUNNING", google) == Step("update", "STOPPING", None)
    assert calls(google) == [("GET", "tpu-sft-dev")]


@pytest.mark.parametrize("prior", PRIORS)
@pytest.mark.parametrize("status", AT_REST)
def test_a_vm_stopped_for_good_is_replaced_not_started(program, google, status, prior):
    google.status = status
    assert up(program(status), prior, google) == Step("replace", status if prior else None, "RUNNING")
    assert calls(google) == [("GET", "tpu-sft-dev"), ("DELETE", "tpu-sft-dev")]  # no start: Google would refuse it
    # The new VM: its first `pulumi up` drops the declared status, calling nothing; the next has nothing to do.
    assert up(program("RUNNING"), "RUNNING", google) == Step("update", "RUNNING", None)
    assert up(program("RUNNING"), None, google) == Step("same", None, None)
    assert calls(google)[2:] == [("GET", "tpu-sft-dev"), ("GET", "tpu-sft-dev")]


@pytest.mark.parametrize("answer", [{"instance_ids": {"tpu-sft-dev": None}}, {"compute_api_off": True}])
def test_no_vm_to_read_declares_no_status(mock_stack, answer):
    """The first `pulumi up`: no VM yet (a 404), or an empty project whose Compute Engine API the stack enables itself
    (Google's 403 for a disabled API): the VM is declared, as one to create."""
    vm = mock_stack(**answer).one(INSTANCE)
    assert "desiredStatus" not in vm.inputs and REPLACED_WHEN_STOPPED not in vm.replace_on_changes


def test_declared_without_the_replacement_the_provider_starts_it_and_google_refuses(program, google):
    """`desired_status` alone, without the replacement: after the refresh the provider starts the VM, and every
    later `pulumi up` fails the same way."""
    google.status = "TERMINATED"
    vm = program("TERMINATED")
    before = dataclasses.replace(vm, replace_on_changes=[p for p in vm.replace_on_changes if p != "desiredStatus"])
    for _ in range(2):
        with pytest.raises(ProviderError) as refused:
            up(before, "RUNNING", google)
        assert str(refused.value) == (
            "Error starting instance: googleapi: Error 400: Instance tpu-sft-dev (ct6e-standard-8t) has TPUs attached "
            "and cannot be restarted: TPU instances can only be deleted once stopped."
        )
    assert google.status == "TERMINATED"


def test_the_standin_starts_a_stopped_vm_without_tpus(program):
    """The refusal is the TPU's: the same start of a machine type without TPUs runs the VM again."""
    vm = program("TERMINATED")
    standin = GceStandin(instance=vm.inputs["name"], machine_type="n2-standard-8", status="TERMINATED").start()
    try:
        before = dataclasses.replace(vm, replace_on_changes=[])
        assert up(before, "RUNNING", standin) == Step("update", "TERMINATED", "RUNNING")
        assert standin.status == "RUNNING" and ("POST", "start") in calls(standin)
    finally:
        standin.stop()
