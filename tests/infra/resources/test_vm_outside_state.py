"""A flex-start VM is never left outside the stack: its create waits as long as Google holds the request, and a VM
Google made after an earlier `pulumi up` gave up is named by the next one and taken into the state (import), before
anything else is created. Compute Engine's side is rehearsal/flex_start_rules.py `FlexStartCapacity`, which makes
the VM late whatever the provider does; the provider's 20-minute default and its dropped id are quoted there."""

from __future__ import annotations

import logging

import pytest

from infra.config import read_settings
from infra.resources import flex_start
from infra.resources.vm_outside_state import taken_in
from rehearsal import engine
from rehearsal.engine import Stack, run_program
from rehearsal.flex_start_rules import INSTANCE, FlexStartCapacity, timeout_s

FLEX_VM = {"tpu-sft:provisioningModel": "FLEX_START", "tpu-sft:maxRunHours": "4"}


@pytest.fixture
def flex_config(dev_config, monkeypatch):
    monkeypatch.setenv(
        "HF_TOKEN", "hf_" + "Tok3n" * 8
    )  # an update needs one (tests/infra/config/test_settings_errors.py)
    return {k: v for k, v in {**dev_config, **FLEX_VM}.items() if k != "tpu-sft:reservation"}


def test_the_create_waits_as_long_as_google_holds_the_request(mock_stack):
    vm = mock_stack(FLEX_VM, remove=("tpu-sft:reservation",)).one(INSTANCE)
    assert timeout_s(vm.custom_timeouts["create"]) >= flex_start.REQUEST_VALID_MAX_S
    assert mock_stack().one(INSTANCE).custom_timeouts == {}  # a reserved VM is made at once: the provider's default


def test_a_vm_filled_within_the_window_is_the_stacks_own(flex_config):
    capacity = FlexStartCapacity(fills_after_s=90 * 60, project="my-tpu-project")  # past the provider's 20 minutes
    stack = run_program(flex_config, preview=False, capacity=capacity)
    assert stack.one(INSTANCE).import_id == ""  # created, not taken in: nothing was outside the state


class _KnownAtWarning(logging.Handler):
    """What the engine had been told of (the URNs registered) when a warning reached it: the mock engine logs each
    `pulumi.log.warn` as it receives it, and the recording stack grows as registrations arrive."""

    def __init__(self, stack: Stack):
        super().__init__(logging.WARNING)
        self.stack = stack
        self.known: dict[str, set[str]] = {}

    def emit(self, record: logging.LogRecord) -> None:
        self.known[record.getMessage()] = {r.urn for r in self.stack.resources}


def test_a_vm_filled_after_pulumi_up_gave_up_is_taken_in_by_the_next_one(flex_config, monkeypatch, caplog):
    monkeypatch.setattr(flex_start, "CREATE_TIMEOUT", "20m")  # the provider's default: it gives up before Google fills
    capacity = FlexStartCapacity(fills_after_s=90 * 60, project="my-tpu-project")
    first = Stack()
    with pytest.raises(Exception, match="timeout while waiting for state to become 'DONE'"):
        run_program(flex_config, preview=False, capacity=capacity, into=first)
    assert not first.of_type(INSTANCE) and "tpu-sft-dev" in capacity.made  # outside the state, and billing

    monkeypatch.setattr(flex_start, "CREATE_TIMEOUT", "130m")  # as shipped
    caplog.clear()
    again = Stack()
    at_warning = _KnownAtWarning(again)
    logging.getLogger().addHandler(at_warning)
    try:
        run_program(flex_config, preview=False, capacity=capacity, state=first, into=again)
    finally:
        logging.getLogger().removeHandler(at_warning)
    vm = again.one(INSTANCE)
    assert vm.import_id == "projects/my-tpu-project/zones/us-east5-b/instances/tpu-sft-dev"  # named and taken in
    # Said in one line, which stays on screen: what was found, what this update does, and the other choice.
    line = taken_in(read_settings.parse(flex_config, stack="dev"))
    assert [r.getMessage() for r in caplog.records if "outside this stack" in r.getMessage()] == [line]
    assert "\n" not in line and "tpu-sft-dev in us-east5-b" in line and "flex-start" in line
    assert "gcloud compute instances delete tpu-sft-dev --zone us-east5-b --project my-tpu-project" in line
    # Named before anything that needs the VM: when the warning arrived (logged synchronously as the VM is declared),
    # neither the VM nor anything depending on it had been registered, so the engine could have created none of them.
    # What had arrived by then varies (registrations are sent asynchronously): the VM's own dependencies and
    # resources beside it, at most, all in the state of the run that sent the VM's request.
    needs_vm = {vm.urn} | {r.urn for r in again.resources if vm.urn in r.dependencies}
    assert len(needs_vm) > 5 and not at_warning.known[line] & needs_vm
    # The phases run on the VM taken in. (What the first run declared before its failure is not compared: the
    # engine drops registrations still in flight when a create fails, so that set differs from run to run.)
    bootstrap = next(r for r in again.resources if r.name == "tpu-sft-dev-pipeline-bootstrap")
    assert vm.urn in bootstrap.dependencies


def test_the_stacks_own_flex_start_vm_is_named_by_no_warning(flex_config, caplog):
    capacity = FlexStartCapacity(fills_after_s=60, project="my-tpu-project")  # filled within the window
    made = run_program(flex_config, preview=False, capacity=capacity)
    caplog.clear()
    again = run_program(flex_config, preview=False, capacity=capacity, state=made)
    assert again.one(INSTANCE).import_id  # asked for, and the engine leaves the VM its state holds as it is
    assert not [r for r in caplog.records if "outside this stack" in r.getMessage()]


def test_a_reserved_vm_asks_compute_engine_nothing(dev_config):
    capacity = FlexStartCapacity(fills_after_s=0, project="my-tpu-project")
    capacity.made["tpu-sft-dev"] = "projects/my-tpu-project/zones/us-east5-b/instances/tpu-sft-dev"
    assert run_program(dev_config, capacity=capacity).one(INSTANCE).import_id == ""


def test_a_backend_that_does_not_answer_the_state_read_still_takes_the_vm_in(flex_config, monkeypatch, caplog):
    """The state read is proven only against the mock engine: where a real backend refuses it, the VM found is still
    imported (the engine's own rule leaves the stack's VM as it is), without the warning, and the update goes on."""
    capacity = FlexStartCapacity(fills_after_s=60, project="my-tpu-project")
    capacity.made["tpu-sft-dev"] = "projects/my-tpu-project/zones/us-east5-b/instances/tpu-sft-dev"
    answer = engine._Mocks.call

    def refusing(self, args):
        if args.token == engine.STATE_READ:
            return {}, [("stackName", "unknown function pulumi:pulumi:readStackResourceOutputs")]
        return answer(self, args)

    monkeypatch.setattr(engine._Mocks, "call", refusing)
    stack = run_program(flex_config, preview=False, capacity=capacity)
    assert stack.one(INSTANCE).import_id == capacity.made["tpu-sft-dev"]
    assert not [r for r in caplog.records if "outside this stack" in r.getMessage()]
