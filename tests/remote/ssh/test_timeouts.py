"""A command past its timeout is one error, `Unreachable` "no answer within S s", however invoke's timer thread and
its output threads race each other when the timer closes the channel."""

from __future__ import annotations

import time
from types import SimpleNamespace

import pytest
from invoke.exceptions import ThreadException
from invoke.util import ExceptionWrapper

from remote.ssh import connection
from remote.ssh.connection import connect, run
from remote.ssh.errors import Unreachable


class RacingConnection:
    """Stands in for a Connection whose `run` ends the way invoke ends when its timer wins or loses a race."""

    def __init__(self, ending, after_s: float):
        self.ending, self.after_s = ending, after_s
        self.host, self.target, self.closed = "vm", SimpleNamespace(command_timeout=0.2), False

    def run(self, *args, **kwargs):
        time.sleep(self.after_s)
        return self.ending()

    def close(self):
        self.closed = True


def output_thread_failed():
    # Both output threads fail; the first one's error is the one reported.
    raise ThreadException(
        [
            ExceptionWrapper({}, OSError, OSError("Socket is closed"), None),
            ExceptionWrapper({}, EOFError, EOFError("stderr closed too"), None),
        ]
    )


def no_exit_status():
    return SimpleNamespace(exited=-1, stdout="", stderr="")


@pytest.mark.parametrize("ending", [output_thread_failed, no_exit_status])
def test_a_race_lost_to_the_timer_is_the_timeout_error(ending):
    conn = RacingConnection(ending, after_s=0.25)
    with pytest.raises(Unreachable, match=r"^vm: no answer within 0\.2 s \(command timeout\)$"):
        run(conn, "sleep 5", warn=True)
    assert conn.closed


def test_an_output_thread_failing_before_the_timeout_is_a_lost_connection():
    conn = RacingConnection(output_thread_failed, after_s=0)
    with pytest.raises(Unreachable, match="^vm: connection lost: OSError: Socket is closed$"):
        run(conn, "sleep 5", warn=True)


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")  # a traceback on stderr
def test_real_timeouts_always_end_the_same_way(target):
    outcomes = set()
    for _ in range(15):
        with connect(target) as conn:
            try:
                run(conn, "sleep 3", timeout=0.3, warn=True)
                outcomes.add("returned")
            except Unreachable as e:
                outcomes.add(e.reason)
    assert outcomes == {"no answer within 0.3 s (command timeout)"}


def test_exit_status_minus_one_before_the_timeout_is_left_alone():
    assert not connection._cut_by_timeout(no_exit_status(), time.monotonic(), 5.0)


def test_the_timers_kill_of_a_channel_our_side_already_closed_is_quiet():
    """Invoke's timer thread kills a timed-out command by closing its channel; when `run` has meanwhile closed
    the connection, that close fails in the timer thread, whose traceback would land on the user's stderr."""

    def close():
        raise OSError("Socket is closed")

    remote = object.__new__(connection._QuietlyKilledRemote)
    remote.channel = SimpleNamespace(close=close)
    remote.kill()
