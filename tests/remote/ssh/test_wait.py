"""wait_for_ssh's schedule on a clock of its own: what it retries, how long it waits between tries, how long one
try may take, and what it says at the deadline. The real-sshd cases (a late sshd, a late user, a blackholed
host) are in test_first_boot.py and test_faults.py."""

from __future__ import annotations

import socket

import pytest

from remote.ssh import wait
from remote.ssh.errors import AuthError, HostKeyError, TargetError, Unreachable
from remote.ssh.target import Target

TARGET = Target(host="10.0.0.5", user="tpu-sft", key_path="/k", known_hosts="/kh", connect_timeout=10.0)


class Clock:
    """time.monotonic and time.sleep for remote.ssh.wait: sleeping moves the clock, so does each failed attempt."""

    def __init__(self, attempt_s: float = 0.0):
        self.now, self.attempt_s = 100.0, attempt_s
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0, "a wait of nothing: the loop would spin"
        self.sleeps.append(round(seconds, 6))
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    clock = Clock()
    monkeypatch.setattr(wait.time, "monotonic", clock.monotonic)
    monkeypatch.setattr(wait.time, "sleep", clock.sleep)
    monkeypatch.setattr(wait, "require_resolvable", lambda host, port: None)
    return clock


def failing(clock: Clock, errors: list[Exception], calls: list):
    """A connect that fails with `errors` in turn (the last one from then on), recording what each try was given."""

    def connect(target, host):
        calls.append((host, target.connect_timeout))
        clock.now += clock.attempt_s
        raise errors[min(len(calls), len(errors)) - 1]

    return connect


def test_a_host_that_never_answers_is_retried_with_doubling_waits_up_to_the_deadline(clock, monkeypatch):
    calls: list = []
    monkeypatch.setattr(wait, "connect", failing(clock, [Unreachable("10.0.0.5", "connection refused")], calls))
    with pytest.raises(Unreachable) as failed:
        wait.wait_for_ssh(TARGET, deadline_s=40)
    assert clock.sleeps == [0.5, 1, 2, 4, 8, 10, 10, 4.5]  # doubling from 0.5 s, at most 10 s, cut at the deadline
    assert str(failed.value) == ("10.0.0.5: no SSH answer within 40 s (9 attempts; last: 10.0.0.5: connection refused)")
    assert {host for host, _ in calls} == {"10.0.0.5"}  # the target's own host when none is named


def test_without_a_deadline_it_waits_five_minutes(clock, monkeypatch):
    monkeypatch.setattr(wait, "connect", failing(clock, [Unreachable("10.0.0.5", "connection refused")], []))
    with pytest.raises(Unreachable, match="no SSH answer within 300 s"):
        wait.wait_for_ssh(TARGET)
    assert sum(clock.sleeps) == 300


def test_a_refused_key_is_retried_a_changed_host_key_is_not(clock, monkeypatch):
    """A new VM's guest agent installs the key late: AuthError is retried. A host key that does not match what
    is pinned is never retried: waiting cannot make it right."""
    calls: list = []
    refused = AuthError("10.0.0.5: the server refused key /k")
    monkeypatch.setattr(wait, "connect", failing(clock, [refused, refused, HostKeyError("host key CHANGED")], calls))
    with pytest.raises(HostKeyError):
        wait.wait_for_ssh(TARGET, deadline_s=600)
    assert len(calls) == 3 and clock.sleeps == [0.5, 1]


def test_no_try_runs_past_the_deadline(clock, monkeypatch):
    clock.attempt_s = 10.0  # every try spends its whole connect timeout
    calls: list = []
    monkeypatch.setattr(wait, "connect", failing(clock, [Unreachable("10.0.0.5", "timed out")], calls))
    with pytest.raises(Unreachable, match="within 25 s"):
        wait.wait_for_ssh(TARGET, deadline_s=25, host="10.0.0.6")
    assert [timeout for _, timeout in calls] == [10.0, 10.0, 3.5]  # the last cut to what is left: 25 - 21.5
    assert {host for host, _ in calls} == {"10.0.0.6"}  # the host named, not the target's


def test_however_little_time_is_left_it_is_used_for_one_more_try(clock, monkeypatch):
    calls: list = []
    monkeypatch.setattr(wait, "connect", failing(clock, [Unreachable("10.0.0.5", "connection refused")], calls))
    with pytest.raises(Unreachable, match=r"within 1\.2 s \(3 attempts"):
        wait.wait_for_ssh(TARGET, deadline_s=1.2)
    assert clock.sleeps == [0.5, 0.7]


def test_a_try_gets_at_least_a_tenth_of_a_second(clock, monkeypatch):
    clock.attempt_s = 0.1
    calls: list = []
    monkeypatch.setattr(wait, "connect", failing(clock, [Unreachable("10.0.0.5", "timed out")], calls))
    with pytest.raises(Unreachable):
        wait.wait_for_ssh(TARGET, deadline_s=0.05)
    assert [timeout for _, timeout in calls] == [0.1]


def gaierror(code: int):
    def getaddrinfo(*args, **kwargs):
        raise socket.gaierror(
            code, "Temporary failure in name resolution" if code == socket.EAI_AGAIN else "Name or service not known"
        )

    return getaddrinfo


def test_a_name_that_does_not_resolve_fails_at_once(monkeypatch):
    monkeypatch.setattr(wait.socket, "getaddrinfo", gaierror(socket.EAI_NONAME))
    with pytest.raises(TargetError, match="'vm.invalid' does not resolve \\(Name or service not known\\)"):
        wait.require_resolvable("vm.invalid", 22)


def test_a_resolver_that_fails_for_now_is_left_to_the_retries(monkeypatch):
    monkeypatch.setattr(wait.socket, "getaddrinfo", gaierror(socket.EAI_AGAIN))
    assert wait.require_resolvable("vm.example.com", 22) is None


def test_a_host_name_that_is_not_valid_fails_at_once():
    with pytest.raises(TargetError, match="is not a valid host name"):
        wait.require_resolvable("a" * 64 + ".example.com", 22)  # a label over 63 characters: IDNA refuses it


def test_a_new_vm_gets_the_documented_ten_minutes():
    """docs/google-cloud.md: every first contact (put-secret, phase, each host of bootstrap) waits up to 10 min."""
    assert wait.NEW_VM_DEADLINE_S == 600
