"""Resume at boot (workload/run/boot_resume.py): the next attempt starts if, and only if, the last one died with its
boot; it is the same job, with the boot-resume flags, and starts once. The job directories here are made with the
remote layer's own wrapper (remote/ssh/jobs.py), as `start` leaves them on a host."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest

from remote.ssh import jobs
from tests.ssh_testbed import wait_until
from workload.core.contract import RUN_JOB_PREFIX
from workload.run import boot_resume

OTHER_BOOT = "00000000-0000-0000-0000-000000000000"
SETTINGS = {"tpu-sft:steps": "20"}


def this_boot() -> str:
    return Path(boot_resume.BOOT_ID).read_text().strip()


def make_attempt(state: Path, number: int, *, boot_id: str, command: str = "exec echo resumed", **files: str) -> Path:
    """An attempt as jobs.start and claim.start_attempt leave it, its wrapper gone (files: `exit`, `cancelled`)."""
    job = state / "jobs" / f"{RUN_JOB_PREFIX}-{number}"
    job.mkdir(parents=True)
    (job / "job.sh").write_text(jobs.job_script(command, cwd=str(state)))
    (job / "run.sh").write_text(jobs._RUN_SH)
    (job / "boot_id").write_text(boot_id + "\n")
    (job / "pid").write_text("999999 1\n")
    for name, text in files.items():
        (job / name).write_text(text)
    runs = state / "runs"
    runs.mkdir(exist_ok=True)
    (runs / f"{job.name}.json").write_text(json.dumps(SETTINGS))
    (runs / f"{job.name}.json.until").write_text("keep\n")
    return job


def resume(state: Path) -> int:
    argv = ["--jobs-root", str(state / "jobs"), "--attempt-prefix", RUN_JOB_PREFIX]
    return boot_resume.main([*argv, "--boot-resumes", "3", "--deadline-hours", "4"])


def test_an_attempt_that_died_with_its_boot_is_started_again_as_the_next_with_its_settings(tmp_path, capsys):
    make_attempt(tmp_path, 1, boot_id=OTHER_BOOT, exit="0")
    make_attempt(tmp_path, 2, boot_id=OTHER_BOOT)
    assert resume(tmp_path) == 0
    assert "run-2 died with its boot" in capsys.readouterr().out
    job = tmp_path / "jobs" / "run-3"
    wait_until(lambda: (job / "exit").exists(), what="the resumed attempt's exit")
    assert (job / "exit").read_text().strip() == "0"
    assert (job / "boot_id").read_text().strip() == this_boot()
    # The same command, the flags that make the run check its budget at the end of it.
    assert (
        job / "log"
    ).read_text().strip() == "resumed --boot-resume-of run-2 --boot-resumes 3 --resume-deadline-hours 4"
    runs = tmp_path / "runs"
    assert (runs / "run-3.json").read_text() == json.dumps(SETTINGS)
    assert (runs / "run-3.json.until").read_text() == "keep\n"


@pytest.mark.parametrize(
    ("files", "reason"),
    [
        ({"exit": "0"}, "run-1 ended on its own (exit 0)"),
        ({"exit": "1"}, "run-1 ended on its own (exit 1)"),
        ({"cancelled": ""}, "run-1 was cancelled"),
    ],
    ids=["finished", "failed-on-its-own", "cancelled"],
)
def test_an_attempt_that_ended_on_its_own_is_never_restarted_by_a_boot(tmp_path, capsys, files, reason):
    make_attempt(tmp_path, 1, boot_id=OTHER_BOOT, **files)
    assert resume(tmp_path) == 0
    assert reason in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "jobs").iterdir()) == ["run-1"]


def test_a_second_run_of_the_script_in_the_same_boot_starts_nothing(tmp_path, capsys):
    # The resumed attempt appends its flags: sh -c takes them as its own arguments, and sleeps until it is killed
    # (a bare `sleep 30 --boot-resume-of …` would end at once, and the second run would see an attempt that ended).
    make_attempt(tmp_path, 1, boot_id=OTHER_BOOT, command="exec sh -c 'sleep 300' attempt")
    assert resume(tmp_path) == 0
    job = tmp_path / "jobs" / "run-2"
    wait_until(lambda: (job / "pid").exists(), what="the resumed attempt's pid")
    assert resume(tmp_path) == 0
    assert "run-2 belongs to this boot" in capsys.readouterr().out
    assert sorted(p.name for p in (tmp_path / "jobs").iterdir()) == ["run-1", "run-2"]
    os.killpg(int((job / "pid").read_text().split()[0]), signal.SIGKILL)  # the attempt's session, as a boot ends


def test_no_run_on_the_vm_or_only_other_jobs_means_nothing_to_resume(tmp_path, capsys):
    assert resume(tmp_path) == 0
    (tmp_path / "jobs" / "bootstrap").mkdir(parents=True)
    assert resume(tmp_path) == 0
    assert capsys.readouterr().out.count("nothing to resume: no run on this VM") == 2


def test_the_flags_of_an_earlier_boot_resume_are_replaced_not_repeated():
    job_sh = "# head\ncd x && exec python -m workload run --until keep --boot-resume-of run-1 --boot-resumes 3\n"
    resumed = boot_resume.resumed_command(job_sh, ["--boot-resume-of", "run-2"])
    assert resumed == "# head\ncd x && exec python -m workload run --until keep --boot-resume-of run-2\n"
