"""Detached jobs: started once, followed by offset, told apart when finished, failed, dead or cancelled."""

import os
import signal
import threading
import time
from pathlib import Path

import pytest

from remote.ssh import jobs
from remote.ssh.connection import connect
from remote.ssh.errors import BadInput, JobLost, JobNotFound
from tests.ssh_testbed import wait_until


def job_path(state_dir: Path, job_id: str) -> Path:
    return state_dir / "jobs" / job_id


def test_job_runs_detached_and_follow_returns_its_exit_code(target, state_dir):
    with connect(target) as conn:
        state = jobs.start(conn, "count", "for i in 1 2 3; do echo line $i; done; exit 4")
    assert state.state in ("running", "failed") and state.pid
    lines = []
    assert jobs.follow(target, "count", lines.append) == 4
    assert lines == ["line 1", "line 2", "line 3"]
    with connect(target) as conn:
        final = jobs.status(conn, "count")
    assert (final.state, final.exit_code, final.log_size) == ("failed", 4, 21)


def test_starting_an_existing_job_returns_its_state_and_runs_nothing(target, state_dir, scratch):
    counter = scratch / "runs"
    command = f"echo run >> {counter}"
    with connect(target) as conn:
        jobs.start(conn, "once", command)
        assert jobs.follow(target, "once", lambda line: None) == 0
        again = jobs.start(conn, "once", command)
    assert (again.state, again.exit_code) == ("succeeded", 0)
    assert counter.read_text() == "run\n"


def test_concurrent_starts_launch_one_job(target, state_dir, scratch):
    counter = scratch / "runs"
    results, barrier = [], threading.Barrier(4)

    def starter():
        with connect(target) as conn:
            barrier.wait()
            results.append(jobs.start(conn, "race", f"echo run >> {counter}; sleep 0.5"))

    threads = [threading.Thread(target=starter) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert jobs.follow(target, "race", lambda line: None) == 0
    assert counter.read_text() == "run\n"
    assert len({r.pid for r in results}) == 1  # every starter saw the same job
    assert not [p for p in (state_dir / "jobs").iterdir() if p.name.startswith(".staging")]


def test_follow_from_an_offset_skips_what_was_read(target, state_dir):
    with connect(target) as conn:
        jobs.start(conn, "offset", "printf 'first\\nsecond\\nthird'")
    lines = []
    assert jobs.follow(target, "offset", lines.append, offset=len("first\n")) == 0
    assert lines == ["second", "third"]  # the last line has no newline and still arrives


def test_job_killed_without_exit_code_is_reported_as_died(target, state_dir):
    with connect(target) as conn:
        state = jobs.start(conn, "victim", "sleep 30")
        assert state.state == "running"
        os.killpg(state.pid, signal.SIGKILL)  # the wrapper leads its own process group
        died = wait_until(lambda: (s := jobs.status(conn, "victim")).state == "died" and s, what="died")
    assert died.exit_code is None and "gone" in died.detail
    with pytest.raises(JobLost, match="died"):
        jobs.follow(target, "victim", lambda line: None)


def test_reboot_is_detected_by_boot_id(target, state_dir):
    with connect(target) as conn:
        jobs.start(conn, "rebooted", "sleep 30")
        (job_path(state_dir, "rebooted") / "boot_id").write_text("00000000-0000-0000-0000-000000000000\n")
        state = jobs.status(conn, "rebooted")
        jobs.cancel(conn, "rebooted", grace_s=0.1)  # cancel refuses to signal across a reboot: clean up ourselves
    assert (state.state, state.detail) == ("died", "the host rebooted since the job started")
    os.killpg(state.pid, signal.SIGKILL)


def test_cancel_stops_the_whole_process_group(target, state_dir, scratch):
    child_pid = scratch / "child.pid"
    with connect(target) as conn:
        jobs.start(conn, "cancel-me", f"sleep 60 & echo $! > {child_pid}; wait")
        pid = int(wait_until(lambda: child_pid.exists() and child_pid.read_text().strip(), what="child pid"))
        state = jobs.cancel(conn, "cancel-me", grace_s=2)
    assert state.state == "cancelled"
    assert _gone(pid), "the job's child survived cancel"
    with pytest.raises(JobLost, match="cancelled"):
        jobs.follow(target, "cancel-me", lambda line: None)


def test_cancel_leaves_a_finished_job_as_it_was(target, state_dir):
    with connect(target) as conn:
        jobs.start(conn, "done", "exit 0")
        assert jobs.follow(target, "done", lambda line: None) == 0
        assert jobs.cancel(conn, "done").state == "succeeded"


def test_unknown_job_and_bad_job_id(target, state_dir):
    with connect(target) as conn:
        assert jobs.status(conn, "nobody").state == "absent"
        with pytest.raises(JobNotFound):
            jobs.cancel(conn, "nobody")
        with pytest.raises(BadInput, match="job id"):
            jobs.start(conn, "../escape", "true")
        with pytest.raises(BadInput, match="command is empty"):
            jobs.start(conn, "blank", " \n")
    assert not (state_dir / "jobs").exists()  # nothing was claimed
    with pytest.raises(JobNotFound):
        jobs.follow(target, "nobody", lambda line: None)


def _gone(pid: int) -> bool:
    """Not running: no such process, or a zombie (`kill -0` would call a zombie alive)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


# A child in a process group of its own, holding the job's log open: MaxText's trainer and its children.
OWN_GROUP_CHILD = (
    "python3 -c 'import os, time; os.setpgid(0, 0); "
    'open("{pid_file}", "w").write(str(os.getpid())); time.sleep(300)\' & '
)


def test_a_job_ends_with_its_main_process_and_takes_the_rest_of_its_session_along(target, state_dir, scratch):
    child_pid = scratch / "child.pid"
    with connect(target) as conn:
        jobs.start(
            conn,
            "leaves-a-child",
            OWN_GROUP_CHILD.format(pid_file=child_pid)
            + f"while [ ! -s {child_pid} ]; do sleep 0.02; done; echo parent done; exit 3",
        )
    started = time.monotonic()
    lines = []
    assert jobs.follow(target, "leaves-a-child", lines.append, wait_s=0.5) == 3
    assert time.monotonic() - started < 10 and lines == ["parent done"]
    assert _gone(int(child_pid.read_text()))


def test_cancel_reaches_a_child_in_a_process_group_of_its_own(target, state_dir, scratch):
    child_pid = scratch / "child.pid"
    with connect(target) as conn:
        jobs.start(conn, "cancel-group", OWN_GROUP_CHILD.format(pid_file=child_pid) + "wait")
        pid = int(wait_until(lambda: child_pid.exists() and child_pid.read_text().strip(), what="child pid"))
        assert jobs.cancel(conn, "cancel-group", grace_s=1).state == "cancelled"
    assert _gone(pid), "the child in its own process group survived cancel"


def test_a_job_killed_by_a_signal_says_so(target, state_dir):
    with connect(target) as conn:
        jobs.start(conn, "self-kill", "sh -c 'kill -9 $$'")
    assert jobs.follow(target, "self-kill", lambda line: None) == 137
    with connect(target) as conn:
        state = jobs.status(conn, "self-kill")
    assert (state.state, state.detail) == ("failed", "killed by signal 9 (SIGKILL: the kernel's OOM killer sends this)")
