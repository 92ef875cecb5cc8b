"""rehearsal/slice_hosts.py: each host of a simulated slice is its own sshd with its own home and hostname; stopping
the hosts ends every process on them, and a run killed outright leaves nothing running for the next to trip on.
(A host recreated as a managed instance group does it: tests/slice/test_recreated_host.py.)"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from pathlib import Path

from rehearsal.slice_hosts import SliceHosts
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
        wait_until(lambda: len(marked(JOB_MARK)) == 3, 300, "the three detached jobs to start")
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
    wait_until(lambda: len(marked(KILLED_RUN_MARK)) == 2, 300, "the two detached jobs to start")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    wait_until(lambda: marked(KILLED_RUN_MARK) == [], 300, "the killed run's jobs to end")
    with SliceHosts(directory, 2, REMOTE_USER, user_key) as hosts:
        for host in hosts.hosts:
            assert ssh(hosts, host.address, "cat note").strip() == "kept"  # its home is kept across runs
