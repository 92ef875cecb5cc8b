"""A host recreated as a managed instance group does it (same name, new machine, new host key) is let in by the new
instance id the program reads, and only by it (remote/ssh/host_ids.py), on the simulated slice hosts
(rehearsal/slice_hosts.py)."""

from __future__ import annotations

import json
import logging
from pathlib import Path

from rehearsal.slice_hosts import SliceHosts
from remote.ssh.connection import connect, run
from remote.ssh.errors import HostKeyError
from remote.ssh.hosts import WorkerError, WorkerHost, on_every, workers_of
from remote.ssh.target import Target
from tests.ssh_testbed import REMOTE_USER


def hostnames(target: Target) -> list[str | WorkerError]:
    """`hostname` on every worker at once, as a phase reaches them: each one's answer or what refused it."""

    def ask(worker: WorkerHost) -> str:
        with connect(target, worker.host) as conn:
            return run(conn, "hostname").stdout.strip()

    return [
        outcome if isinstance(outcome, str) else WorkerError(worker, outcome)
        for worker, outcome in zip(workers_of(target), on_every(workers_of(target), ask), strict=True)
    ]


def test_a_recreated_host_is_let_in_by_its_new_instance_id_and_never_by_its_name_alone(testbed, user_key, caplog):
    caplog.set_level(logging.WARNING, "remote")
    directory = testbed / "recreated"
    with SliceHosts(directory, 2, REMOTE_USER, user_key) as hosts:
        known = directory / "tasks-known-hosts"  # the program's tasks' own, recorded on first use (IAP)

        def target(*ids: str) -> Target:
            return Target(
                host=hosts.addresses[0],
                workers=hosts.addresses[1:],
                user=REMOTE_USER,
                key_path=str(user_key.private),
                known_hosts=str(known),
                trust_on_first_use=True,
                host_ids=tuple(zip(hosts.addresses, ids, strict=True)),
            )

        assert hostnames(target("9001", "9002")) == ["worker-0", "worker-1"]
        first_keys = known.read_text().splitlines()
        recreated = hosts.recreate(1)
        assert recreated.sshd.known_hosts_line.strip() not in first_keys  # a new key under the old name and address

        same_ids = hostnames(target("9001", "9002"))
        assert same_ids[0] == "worker-0"
        assert isinstance(same_ids[1], WorkerError) and isinstance(same_ids[1].cause, HostKeyError)
        assert "CHANGED" in str(same_ids[1]) and str(same_ids[1]).startswith(f"worker 1 ({hosts.addresses[1]})")

        assert hostnames(target("9001", "9003")) == ["worker-0", "worker-1"]
        (worker_0_key,) = [line for line in first_keys if line.startswith(f"{hosts.addresses[0]} ")]
        assert known.read_text().splitlines() == [worker_0_key, recreated.sshd.known_hosts_line.strip()]
        assert json.loads(Path(f"{known}.ids").read_text()) == dict(zip(hosts.addresses, ("9001", "9003"), strict=True))
        assert f"{hosts.addresses[1]}: a new instance (id 9003, was 9002)" in caplog.text
        assert hostnames(target("9001", "9003")) == ["worker-0", "worker-1"]  # and from now on, pinned again
