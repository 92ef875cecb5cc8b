"""rehearsal/slice_hosts.py: each host of a simulated slice is its own sshd with its own home and hostname; stopping
the hosts ends every process on them, and a run killed outright leaves nothing running for the next to trip on. A
host recreated as a managed instance group does it (same name, new machine, new host key) is let in by the new
instance id the program reads, and only by it (remote/ssh/host_ids.py)."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from rehearsal.slice_hosts import SliceHosts
from remote.ssh.connection import connect, run
from remote.ssh.errors import HostKeyError
from remote.ssh.hosts import WorkerError, WorkerHost, on_every, workers_of
from remote.ssh.target import Target
from tests.ssh_testbed import REMOTE_USER, wait_until

REPO = Path(__file__).resolve().parents[2]
# What the hosts' detached jobs sleep for: unique to this test run, since others may run these tests at once.
JOB_MARK, KILLED_RUN_MARK = f"{os.getpid()}.31", f"{os.getpid()}.27"


def ssh(hosts: SliceHosts, address: str, command: str) -> str:
    return subprocess.run(
        [
            "ssh",
            "-i",
            str(hosts.user_key.private),
            "-o",
            f"UserKnownHostsFile={hosts.known_hosts}",
            "-o",
            "BatchMode=yes",
            "-o",
            "StrictHostKeyChecking=yes",
            f"{REMOTE_USER}@{address}",
            command,
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout


def marked(marker: str) -> list[int]:
    """Processes on this machine (any namespace) whose command line holds `marker`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                    found.append(int(entry))
            except OSError:
                continue
    return found


def test_each_host_has_its_own_home_and_hostname_and_stop_ends_its_jobs(testbed, user_key, remote_user):
    with SliceHosts(testbed / "own-homes", 3, REMOTE_USER, user_key) as hosts:
        assert len(set(hosts.addresses)) == 3
        for host in hosts.hosts:
            said = ssh(
                hosts,
                host.address,
                f'hostname; echo "$HOME"; echo {JOB_MARK} > "$HOME/note"; '
                f"setsid nohup sleep {JOB_MARK} </dev/null >/dev/null 2>&1 &",
            )
            assert said.split() == [f"worker-{host.worker_id}", remote_user.pw_dir]
        for host in hosts.hosts:
            assert sorted(p.name for p in host.home.iterdir()) == ["note"]  # its own only
        mine = Path(remote_user.pw_dir, "note")
        assert not mine.exists() or JOB_MARK not in mine.read_text()  # this machine's home untouched
        # ssh returns once the shell has forked the job, maybe before the fork has become `sleep`
        wait_until(lambda: len(marked(JOB_MARK)) == 3, 10, "the three detached jobs to start")
    assert marked(JOB_MARK) == []  # detached jobs end with their host


def test_a_killed_run_leaves_nothing_running_and_the_next_run_starts(testbed, user_key, remote_user):
    directory = testbed / "killed-run"
    starter = textwrap.dedent(f"""
        import sys, time
        from pathlib import Path
        from rehearsal.slice_hosts import SliceHosts
        from rehearsal.sshd import UserKey
        key = UserKey(Path({str(user_key.private)!r}), Path({str(user_key.authorized_keys)!r}))
        hosts = SliceHosts(Path({str(directory)!r}), 2, {REMOTE_USER!r}, key)
        hosts.start()
        print(" ".join(hosts.addresses), flush=True)
        time.sleep(600)
    """)
    proc = subprocess.Popen([sys.executable, "-c", starter], cwd=REPO, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    first = proc.stdout.readline().split()
    for address in first:  # its host keys die with it: nothing to pin them against
        subprocess.run(
            [
                "ssh",
                "-i",
                str(user_key.private),
                "-o",
                "BatchMode=yes",
                "-o",
                "StrictHostKeyChecking=no",
                "-o",
                "UserKnownHostsFile=/dev/null",
                f"{REMOTE_USER}@{address}",
                f"echo kept > note; setsid nohup sleep {KILLED_RUN_MARK} </dev/null >/dev/null 2>&1 &",
            ],
            check=True,
            capture_output=True,
            timeout=30,
        )
    wait_until(lambda: len(marked(KILLED_RUN_MARK)) == 2, 10, "the two detached jobs to start")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    wait_until(lambda: marked(KILLED_RUN_MARK) == [], 10, "the killed run's jobs to end")
    with SliceHosts(directory, 2, REMOTE_USER, user_key) as hosts:
        for host in hosts.hosts:
            assert ssh(hosts, host.address, "cat note").strip() == "kept"  # its home is kept across runs


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
