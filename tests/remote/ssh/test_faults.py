"""Faults between this machine and the host: nothing the job printed is lost, nothing runs twice, nothing hangs."""

import logging
import threading
import time
from dataclasses import replace
from pathlib import Path

import pytest

from remote.ssh import jobs
from remote.ssh.connection import connect
from remote.ssh.errors import Unreachable
from remote.ssh.wait import wait_for_ssh
from tests.ssh_testbed import wait_until

LINES = 40


def released_job(scratch: Path) -> str:
    """Counts its runs, prints a first line, waits for `release`, then prints LINES numbered lines and exits 7."""
    return (
        f"echo run >> {scratch}/runs; echo first; while [ ! -e {scratch}/release ]; do sleep 0.02; done; "
        f"i=0; while [ $i -lt {LINES} ]; do echo line $i; i=$((i+1)); done; exit 7"
    )


class Follower:
    """`jobs.follow` in a thread, collecting lines."""

    def __init__(self, target, job_id, **kwargs):
        self.lines, self.result, self.error = [], None, None

        def go():
            try:
                self.result = jobs.follow(target, job_id, self.lines.append, **kwargs)
            except Exception as e:  # handed to the test thread
                self.error = e

        self.thread = threading.Thread(target=go, daemon=True)
        self.thread.start()

    def join(self, timeout: float = 30.0):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "follow did not return"
        if self.error:
            raise self.error
        return self.result


def patient(target):
    """The same host with an unhurried command timeout, for the steps around the fault: starting a job waits
    up to 2 s for its pid, which a loaded CI worker can need; only the follow under test runs on tight limits."""
    return replace(target, command_timeout=10.0)


def assert_everything_once(follower: Follower, scratch: Path) -> None:
    assert follower.lines == ["first"] + [f"line {i}" for i in range(LINES)]
    assert (scratch / "runs").read_text() == "run\n"


def test_session_killed_server_side_mid_job(private_host, scratch, caplog):
    target = private_host.target(scratch / "state", connect_timeout=1.0, command_timeout=3.0)
    with connect(target) as conn:
        jobs.start(conn, "survivor", released_job(scratch))
    follower = Follower(target, "survivor", wait_s=0.5)
    wait_until(lambda: follower.lines, what="the first line")
    caplog.set_level(logging.WARNING, "remote")
    assert private_host.sshd.kill_sessions() >= 1  # every per-connection sshd: the follow's session dies
    (scratch / "release").touch()
    assert follower.join() == 7
    assert_everything_once(follower, scratch)
    assert "reconnecting" in caplog.text


def test_sshd_stopped_and_restarted_while_following(private_host, scratch, caplog):
    caplog.set_level(logging.WARNING, "remote")
    target = private_host.target(scratch / "state", connect_timeout=1.0, command_timeout=3.0)
    with connect(target) as conn:
        jobs.start(conn, "through-restart", released_job(scratch))
    follower = Follower(target, "through-restart", wait_s=0.5, max_backoff_s=0.5)
    wait_until(lambda: follower.lines, what="the first line")
    private_host.sshd.stop()
    wait_until(lambda: caplog.text.count("reconnecting") >= 2, what="failed reconnections")
    (scratch / "release").touch()  # the job finishes while nobody can reach the host
    wait_until(lambda: (scratch / "state/jobs/through-restart/exit").exists(), what="the job's exit")
    private_host.sshd.start()  # same port, same host key
    assert follower.join() == 7
    assert_everything_once(follower, scratch)


def test_link_blackholed_while_following(private_host, scratch, make_proxy, tmp_path, caplog):
    caplog.set_level(logging.WARNING, "remote")
    proxy = make_proxy((private_host.sshd.address, private_host.sshd.port))
    known = tmp_path / "known_hosts"
    known.write_text(private_host.sshd.known_hosts_line.replace(f":{private_host.sshd.port} ", f":{proxy.port} "))
    target = private_host.target(
        scratch / "state", port=proxy.port, known_hosts=str(known), connect_timeout=1.0, command_timeout=1.0
    )
    with connect(patient(target)) as conn:
        jobs.start(conn, "dark", released_job(scratch))
    follower = Follower(target, "dark", wait_s=0.5, max_backoff_s=0.5)
    wait_until(lambda: follower.lines, what="the first line")
    proxy.blackhole()  # packets vanish: no reset, no error, only silence
    cut = time.monotonic()
    (scratch / "release").touch()
    wait_until(lambda: "reconnecting" in caplog.text, timeout=300, what="the timeout to notice the dead link")
    assert time.monotonic() - cut < 20  # wait_s 0.5 + command timeout 1 (+ channel timeout 1), not an hour
    proxy.forward()
    assert follower.join() == 7
    assert_everything_once(follower, scratch)


def test_follow_gives_up_at_its_deadline_and_says_where_to_resume(private_host, scratch):
    target = private_host.target(scratch / "state", connect_timeout=0.5, command_timeout=1.0)
    with connect(patient(target)) as conn:
        jobs.start(conn, "orphan", "echo hello; sleep 30")
    follower = Follower(target, "orphan", wait_s=0.5, reconnect_deadline_s=1.5, max_backoff_s=0.3)
    wait_until(lambda: follower.lines, what="the first line")
    private_host.sshd.stop()
    start = time.monotonic()
    with pytest.raises(Unreachable, match="follow again from offset 6"):
        follower.join()
    assert time.monotonic() - start < 20  # its 1.5 s deadline, not the job's 30 s
    private_host.sshd.start()
    with connect(patient(target)) as conn:
        jobs.cancel(conn, "orphan", grace_s=1)


def test_wait_for_ssh_until_the_server_comes_up(private_host, scratch, caplog):
    caplog.set_level(logging.INFO, "remote")
    target = private_host.target(scratch / "state", connect_timeout=0.5)
    private_host.sshd.stop()
    outcome = {}

    def waiter():
        with wait_for_ssh(target, deadline_s=120, first_backoff_s=0.1, max_backoff_s=0.3):
            outcome["answered"] = time.monotonic()

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    wait_until(lambda: caplog.text.count("waiting for SSH") >= 3, what="refused attempts")
    up = time.monotonic()
    private_host.sshd.start()  # from this thread: sshd dies with the thread that started it
    thread.join(60)
    assert "answered" in outcome, "no answer within 60 s of the server coming up"
    assert outcome["answered"] > up  # once the server is up, not at the deadline (120 s)


def test_wait_for_ssh_on_a_blackholed_host_stops_at_the_deadline(sshd_host, scratch, make_proxy):
    proxy = make_proxy((sshd_host.sshd.address, sshd_host.sshd.port))
    proxy.blackhole()
    target = sshd_host.target(scratch / "state", port=proxy.port, connect_timeout=60.0)
    start = time.monotonic()
    with pytest.raises(Unreachable, match="no SSH answer within 2 s"):
        wait_for_ssh(target, deadline_s=2.0, first_backoff_s=0.2)
    assert 1.9 < time.monotonic() - start < 30  # the 60 s connect timeout is cut to what is left of the deadline
