"""`tpu-sft status` names Google's preemptions of a VM in its group of one (remote/stack/preemptions.py), read from
Compute Engine's operations the way Google's sample lists them, against the Compute Engine stand-in
(tests/workload/gce_standin.py), which answers only that filter."""

import pytest

from remote.stack import cli, preemptions
from remote.stack.outputs import StackOutputs
from tests.workload.gce_standin import OWNER_TOKEN, GceStandin

OWN = "tpu-sft-dev-01"


@pytest.fixture
def standin(monkeypatch):
    running = GceStandin(instance=OWN).start()
    monkeypatch.setenv("TPU_SFT_COMPUTE_API", f"http://{running.host}")
    yield running
    running.stop()


def _read(token=OWNER_TOKEN):
    return preemptions.read("my-tpu-project", "us-east5-b", OWN, token=lambda: token)


def test_only_the_vms_own_preemptions_are_read_oldest_first(standin):
    standin.preempted = [
        (OWN, "2026-12-07T10:15:00.000-08:00"),
        ("someone-elses-vm", "2026-12-07T10:20:00.000-08:00"),
        (OWN, "2026-12-07T09:02:00.000-08:00"),
    ]
    found = _read()
    assert found.times == ("2026-12-07T09:02:00.000-08:00", "2026-12-07T10:15:00.000-08:00")
    line = found.line(OWN, "run-3")
    assert line == (
        f"recovery: Google preempted {OWN} 2 times, last at 2026-12-07T10:15:00.000-08:00 "
        "(compute.instances.preempted); its group recreated it with its data disk; the run's latest attempt is run-3"
    )
    assert OWNER_TOKEN not in line
    [(_, path, _)] = standin.calls
    assert "operationType%3D%22compute.instances.preempted%22" in path


def test_never_preempted_says_nothing_and_an_unread_record_says_why(standin):
    assert _read().line(OWN, "run-1") is None
    refused = _read(token="ya29.not-the-owner")
    assert (
        refused.line(OWN, "run-1")
        == f"recovery: whether Google preempted {OWN} is unknown (Compute Engine answered 401)"
    )


def test_status_asks_only_for_a_vm_in_its_group(standin):
    standin.preempted = [(OWN, "2026-12-07T10:15:00.000-08:00")]
    base = {"project": "my-tpu-project", "zone": "us-east5-b"}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(preemptions, "access_token", lambda: OWNER_TOKEN)
        in_group = StackOutputs("", {**base, "instanceName": OWN, "instanceGroupName": "tpu-sft-dev"})
        assert "preempted tpu-sft-dev-01 1 time," in (cli._recovery(in_group, None) or "")
        assert (cli._recovery(in_group, None) or "").endswith("its group recreated it with its data disk")
        plain = StackOutputs("", {**base, "instanceName": "tpu-sft-dev"})
        a_slice = StackOutputs("", {**base, "instanceGroupName": "tpu-sft-dev"})
        assert cli._recovery(plain, "run-1") is None and cli._recovery(a_slice, "run-1") is None
