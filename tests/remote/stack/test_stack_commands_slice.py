"""`scripts/tpu-sft status | logs | cancel` on a multi-host slice: worker 0 (by each host's metadata, not the target's
order) is the run's log and state, every worker's state of the same job is listed, and `cancel` stops the job on
every worker. A host that does not answer, or hosts whose metadata give no whole worker order, is one line.

The hosts are real sshds in namespaces of their own (rehearsal/slice_hosts.py), numbered so that the host the target
lists first is worker 1. Each holds the run's job (`run-N`, as the phases leave it on every worker): a real detached
job that prints its events, then sleeps until it is stopped.
"""

from __future__ import annotations

import shlex
import subprocess
from pathlib import Path

import pytest

from rehearsal.fresh_vm.address import claim_address
from rehearsal.metadata_standin import tpu_env
from rehearsal.slice_hosts import SliceHost, SliceHosts
from remote.pipeline.target import PipelineTarget
from remote.ssh import jobs
from remote.ssh.connection import connect
from remote.ssh.errors import EXIT_FAILED, EXIT_UNREACHABLE
from tests.fixtures.sshd import slice_target
from tests.remote.stack_commands import (
    FINISHED,
    RUNNING,
    event,
    follow_logs,
    standing_at,
    tpu_sft,
)
from tests.ssh_testbed import REMOTE_USER, wait_until

GROUP = "tpu-sft-slice"  # the stack's instanceGroupName: a slice's outputs name no single instance
# What the first listed host, worker 1, printed: never what a command shows as the run's.
WORKER_1 = [event("phase", phase="train", status="start", reason="not done yet")]
STEP = "run run-3: running · train running · step 3/10 · loss 1.2345 · ETA 1 min 10 s"
RESUMES = "done steps and saved checkpoints stay; the next `pulumi up` resumes it"


@pytest.fixture(scope="module")
def slice_hosts(testbed, user_key, remote_user):
    """Two hosts; the one at place 0 (the target's first) says it is worker 1."""
    with SliceHosts(testbed / "stack-slice", 2, REMOTE_USER, user_key, worker_ids=(1, 0)) as hosts:
        yield hosts


class OnSlice:
    """This test's state directory on the hosts, its target and the stack's outputs standing at it."""

    def __init__(self, hosts: SliceHosts, recorded: dict, state: str):
        self.hosts, self.state, self.recorded = hosts, state, recorded
        self.worker_0, self.worker_1 = hosts.by_worker_id(0), hosts.by_worker_id(1)

    def target(self, workers: tuple[str, ...] | None = None) -> PipelineTarget:
        return slice_target(self.hosts, self.state, workers)

    def outputs(self, target: PipelineTarget | None = None) -> dict:
        outputs = standing_at(self.recorded, target or self.target(), instanceGroupName=GROUP)
        del outputs["instanceName"]
        return outputs

    def path(self, host: SliceHost, relative: str) -> Path:
        """A file of this test's state on `host`, as this machine sees it."""
        return host.home / self.state / relative

    def start(self, host: SliceHost, job_id: str, events: list[str], then: str = "") -> None:
        """The job on `host`: it prints `events`, runs `then`, and, if that returns, sleeps in a child process
        whose pid it records (the handshake `sleeping` waits on) until it is stopped."""
        printed = "printf '%s\\n' " + " ".join(shlex.quote(line) for line in events)
        command = f"{printed}; {then or 'true'}; sleep 3600 & echo $! > sleeper.tmp && mv sleeper.tmp sleeper; wait"
        with connect(self.target(), host.address) as conn:
            jobs.start(conn, job_id, command)

    def sleeping(self, host: SliceHost, job_id: str) -> int:
        """The pid of the job's sleep, once it sleeps (in the host's own process namespace)."""
        sleeper = self.path(host, f"jobs/{job_id}/sleeper")
        return int(wait_until(lambda: sleeper.exists() and sleeper.read_text().strip(), what=f"{sleeper}"))

    def state_of(self, host: SliceHost, job_id: str) -> str:
        with connect(self.target(), host.address) as conn:
            return jobs.status(conn, job_id).state


@pytest.fixture
def on_slice(slice_hosts, recorded, request) -> OnSlice:
    return OnSlice(slice_hosts, recorded, f"state-{request.node.name[:60]}")


def alive(host: SliceHost, pid: int) -> bool:
    """Whether process `pid` of the host's namespace lives (a zombie has ended)."""
    try:
        stat = host.path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def one_line(result: subprocess.CompletedProcess) -> str:
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


def test_status_logs_and_cancel_read_worker_0_and_cancel_stops_every_worker(tmp_path, on_slice):
    w0, w1 = on_slice.worker_0, on_slice.worker_1
    assert on_slice.hosts.addresses[0] == w1.address  # the target lists worker 1 first
    on_slice.start(w0, "run-3", RUNNING)
    on_slice.start(w1, "run-3", WORKER_1)
    sleepers = {w0.worker_id: on_slice.sleeping(w0, "run-3"), w1.worker_id: on_slice.sleeping(w1, "run-3")}
    outputs = on_slice.outputs()

    status = tpu_sft(tmp_path, outputs, "status")
    assert status.returncode == 0, status.stderr
    assert status.stdout.splitlines() == [
        f"slice {GROUP}: 2 workers answer SSH (worker 0 at {w0.address})",
        STEP,
        f"workers: 0 {w0.address} (running), 1 {w1.address} (running)",
    ]
    logs = tpu_sft(tmp_path, outputs, "logs")
    assert logs.returncode == 0, logs.stderr
    assert logs.stdout.splitlines() == [
        "✓ convert done in 12 s",
        "▶ train",
        "train step 3/10 · loss 1.2345 · 1.00 s/step · ETA 1 min 10 s",
    ]

    cancelled = tpu_sft(tmp_path, outputs, "cancel", "--grace", "1")
    assert cancelled.returncode == 0, cancelled.stderr
    assert cancelled.stdout.splitlines() == [
        f"run run-3 cancelled on 2 workers: 0 {w0.address} (cancelled), 1 {w1.address} (cancelled); {RESUMES}"
    ]
    for host in (w0, w1):  # cancel returns once the job's whole session is gone
        assert on_slice.state_of(host, "run-3") == "cancelled"
        assert not alive(host, sleepers[host.worker_id])
    after = tpu_sft(tmp_path, outputs, "status").stdout.splitlines()
    assert after[1].startswith("run run-3: cancelled · train running")
    assert after[2] == f"workers: 0 {w0.address} (cancelled), 1 {w1.address} (cancelled)"
    again = tpu_sft(tmp_path, outputs, "cancel")
    assert again.returncode == 0, again.stderr
    assert again.stdout.strip() == "run run-3 already cancelled on every worker: nothing to cancel"


def test_cancel_leaves_a_worker_whose_job_ended_as_it_ended(tmp_path, on_slice):
    """The other workers' runs end with train; a worker that has ended keeps its state, one that lacks the job is
    said to; worker 0's is stopped."""
    w0, w1 = on_slice.worker_0, on_slice.worker_1
    on_slice.start(w0, "run-2", RUNNING)
    with connect(on_slice.target(), w1.address) as conn:
        jobs.start(conn, "run-2", "exit 0")
    wait_until(lambda: on_slice.state_of(w1, "run-2") == "succeeded", what="worker 1's job to end")
    sleeper = on_slice.sleeping(w0, "run-2")
    outputs = on_slice.outputs()

    status = tpu_sft(tmp_path, outputs, "status").stdout.splitlines()
    assert status[2] == f"workers: 0 {w0.address} (running), 1 {w1.address} (succeeded)"
    cancelled = tpu_sft(tmp_path, outputs, "cancel", "--grace", "1")
    assert cancelled.stdout.strip() == (
        f"run run-2 cancelled on 2 workers: 0 {w0.address} (cancelled), 1 {w1.address} (succeeded); {RESUMES}"
    )
    assert not alive(w0, sleeper)
    assert on_slice.state_of(w1, "run-2") == "succeeded"

    on_slice.start(w0, "run-4", FINISHED)  # a later attempt that worker 1 never got
    on_slice.sleeping(w0, "run-4")
    status = tpu_sft(tmp_path, outputs, "status").stdout.splitlines()
    assert status[2] == f"workers: 0 {w0.address} (running), 1 {w1.address} (absent)"


def test_logs_follow_worker_0_to_its_end(tmp_path, on_slice):
    w0, w1 = on_slice.worker_0, on_slice.worker_1
    rest = "printf '%s\\n' " + " ".join(shlex.quote(line) for line in FINISHED)
    # The job's directory is <state>/jobs/run-1: it goes on once the test makes <state>/go.
    on_slice.start(w0, "run-1", RUNNING, then=f"while [ ! -e ../../go ]; do sleep 0.05; done; {rest}; exit 0")
    on_slice.start(w1, "run-1", WORKER_1)
    code, shown, err = follow_logs(tmp_path, on_slice.outputs(), "train step 3/10", on_slice.path(w0, "go").touch)
    assert code == 0, err
    assert shown.splitlines() == [
        "✓ convert done in 12 s",
        "▶ train",
        "train step 3/10 · loss 1.2345 · 1.00 s/step · ETA 1 min 10 s",
        "✓ train done in 30 s",
        "✓ keep done in 1 s",
        f"summary: {FINISHED[-1]}",
    ]
    assert err.strip() == "the run ended (exit code 0)"


def test_a_host_that_does_not_answer_is_named_in_one_line(tmp_path, on_slice):
    silent, lock = claim_address()  # a loopback address of our own with nothing listening on port 22
    try:
        outputs = on_slice.outputs(on_slice.target(workers=(silent,)))
        said = f"{silent} does not answer SSH (cannot connect to port 22: "
        listing = f"a command on slice {GROUP} needs every host: check them with `gcloud compute instance-groups "
        for verb in ("cancel", "logs"):
            result = tpu_sft(tmp_path, outputs, verb)
            assert result.returncode == EXIT_UNREACHABLE
            line = one_line(result)
            assert line.startswith(f"error: {said}") and listing in line, line
        status = tpu_sft(tmp_path, outputs, "status")
        assert status.returncode == EXIT_UNREACHABLE
        assert status.stdout.splitlines()[0].startswith(f"slice: {said}")
    finally:
        lock.close()


@pytest.fixture
def repeated_worker_id(slice_hosts):
    """Both hosts' tpu-env say worker 0; each host's own again after."""
    for host in slice_hosts.hosts:
        host.metadata.set("tpu-env", tpu_env(0, 2))
    yield
    for host in slice_hosts.hosts:
        host.metadata.set("tpu-env", tpu_env(host.worker_id, slice_hosts.count))


def test_a_repeated_worker_id_is_one_line(tmp_path, on_slice, repeated_worker_id):
    first, second = on_slice.hosts.addresses
    for verb in ("status", "logs", "cancel"):
        result = tpu_sft(tmp_path, on_slice.outputs(), verb)
        assert result.returncode == EXIT_FAILED
        assert one_line(result).startswith(f"error: {first} and {second}: both have TPU_WORKER_ID 0 in their tpu-env")
        assert result.stdout == ""
