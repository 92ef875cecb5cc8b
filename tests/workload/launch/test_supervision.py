"""A step ends when its process ends, whatever that process's children do: MaxText's trainer, kill -9'd (as
the OOM killer does), leaves a multiprocessing spawn worker and a resource_tracker holding its stdout."""

import os
import signal
import sys
import threading
import time

import pytest

from tests.procs import processes
from workload.launch import exit_reason
from workload.launch.proc import StepFailed, run_logged

# Like train_sft under the hood: a spawn-context worker (which starts multiprocessing's resource_tracker), both
# inheriting stdout, then the main process idles until it is killed.
FAKE_TRAINER = """
import multiprocessing, os, sys, time
def idle():
    time.sleep(600)
if __name__ == "__main__":
    worker = multiprocessing.get_context("spawn").Process(target=idle)
    worker.start()
    print("ready", os.getpid(), worker.pid, flush=True)
    time.sleep(600)
"""


def test_a_killed_process_ends_its_step_and_takes_its_children_along(tmp_path):
    lines: list[str] = []
    outcome: dict = {}

    script = tmp_path / "fake_trainer.py"  # a file: the spawn worker re-imports it to find `idle`
    script.write_text(FAKE_TRAINER)

    def step():
        try:
            run_logged(
                [sys.executable, str(script)],
                env=dict(os.environ),
                log_path=str(tmp_path / "log"),
                cwd=str(tmp_path),
                on_line=lines.append,
                scrub=lambda s: s,
            )
        except StepFailed as failed:
            outcome["failed"] = failed

    thread = threading.Thread(target=step, daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not any(line.startswith("ready") for line in lines):
        assert time.monotonic() < deadline and thread.is_alive(), "the fake trainer never got ready"
        time.sleep(0.05)
    _, main_pid, worker_pid = next(line for line in lines if line.startswith("ready")).split()
    children = [p["pid"] for p in processes() if p["ppid"] == int(main_pid)]
    assert len(children) == 2 and int(worker_pid) in children  # the spawn worker and the resource_tracker
    assert {os.getpgid(pid) for pid in (int(main_pid), *children)} == {os.getpgid(0)}  # killpg reaches them all
    os.kill(int(main_pid), signal.SIGKILL)
    killed = time.monotonic()
    thread.join(30)
    assert not thread.is_alive(), "the step did not end with its process"
    assert time.monotonic() - killed < 20  # not when the children end (600 s)
    failed = outcome["failed"]
    assert failed.cause == "killed by signal 9 (SIGKILL: the kernel's OOM killer sends this)"
    assert "\n" not in failed.cause
    assert [pid for pid in children if os.path.exists(f"/proc/{pid}")] == []  # killed and reaped by the step


def test_an_exit_code_is_the_cause_when_nothing_better_was_printed(tmp_path):
    with pytest.raises(StepFailed, match="^exited with code 3 without an error message$"):
        run_logged(
            [sys.executable, "-c", "import sys; print('hi'); sys.exit(3)"],
            env=dict(os.environ),
            log_path=str(tmp_path / "log"),
            cwd=str(tmp_path),
            on_line=lambda line: None,
            scrub=lambda s: s,
        )


@pytest.mark.parametrize(
    ("before", "after", "expected"),
    [
        (0, 1, "killed by the kernel's OOM killer (signal 9, SIGKILL): the host ran out of memory"),
        (2, 2, "killed by signal 9 (SIGKILL: the kernel's OOM killer sends this)"),
        (None, None, "killed by signal 9 (SIGKILL: the kernel's OOM killer sends this)"),
    ],
)
def test_sigkill_is_called_oom_only_where_the_kernel_counted_one(before, after, expected):
    assert exit_reason.describe(-9, before, after) == expected


def test_other_endings_in_one_line():
    assert exit_reason.describe(-15) == "killed by signal 15 (SIGTERM)"
    assert exit_reason.describe(2) == "exited with code 2"


def test_the_oom_counter_is_read_from_cgroup_v2_and_v1(tmp_path):
    (tmp_path / "cgroup").write_text("0::/job.slice\n")
    (tmp_path / "root" / "job.slice").mkdir(parents=True)
    (tmp_path / "root" / "job.slice" / "memory.events").write_text("low 0\nhigh 0\nmax 3\noom 2\noom_kill 2\n")
    assert exit_reason.oom_kills(str(tmp_path / "cgroup"), str(tmp_path / "root")) == 2
    (tmp_path / "cgroup").write_text("4:memory:/docker/abc\n0::/\n")
    (tmp_path / "root" / "memory").mkdir()
    (tmp_path / "root" / "memory" / "memory.oom_control").write_text("oom_kill_disable 0\nunder_oom 0\noom_kill 5\n")
    assert exit_reason.oom_kills(str(tmp_path / "cgroup"), str(tmp_path / "root")) == 5
    assert exit_reason.oom_kills(str(tmp_path / "missing"), str(tmp_path / "nothing")) is None
