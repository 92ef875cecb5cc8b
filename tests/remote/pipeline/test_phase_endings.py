"""Every way `python -m remote phase` ends prints its JSON summary as the last stdout line (Pulumi's stack outputs
come from it), with ok false and the reason when it failed; stderr says the same in one line; no traceback."""

from __future__ import annotations

import io
import json
import os
import stat

import pytest

from remote import cli
from remote.cli import toolkit_verbs
from remote.pipeline import phase
from remote.pipeline.claim import Claimed
from remote.pipeline.outcome import INTERRUPTED
from remote.ssh import jobs
from remote.ssh.errors import EXIT_JOB_LOST, EXIT_UNREACHABLE, JobLost
from remote.ssh.target import Target
from workload.core.config import PipelineConfig
from workload.core.contract import EXIT_UNEXPECTED

TOKEN = "hf_PhaseEndingCanary" + "x" * 20


@pytest.fixture
def phase_env(unreachable_target, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", TOKEN)


def run_phase_cli(capsys) -> tuple[int, dict, list[str]]:
    code = cli.main(["phase", "train"])
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and TOKEN not in out + err
    errors = [line for line in err.splitlines() if line.startswith(("error:", "interrupted"))]
    return code, json.loads(out.splitlines()[-1]), errors


def test_a_host_still_unreachable_after_the_wait(phase_env, capsys, monkeypatch):
    monkeypatch.setattr(phase, "NEW_VM_DEADLINE_S", 1.0)  # port 1 refuses: the wait runs to its deadline
    code, summary, errors = run_phase_cli(capsys)
    assert code == EXIT_UNREACHABLE
    assert summary["event"] == "summary" and summary["phase"] == "train" and summary["ok"] is False
    assert summary["error"].startswith("127.0.0.1: no SSH answer within 1 s")
    assert errors == [f"error: {summary['error']}"]


def test_a_job_lost_on_the_host(phase_env, capsys, monkeypatch):
    def lost(*args, **kwargs):
        raise JobLost("train-abc-1", "died", "process 4242 is gone")

    monkeypatch.setattr(phase, "run_phase", lost)
    code, summary, errors = run_phase_cli(capsys)
    assert code == EXIT_JOB_LOST
    assert summary["ok"] is False
    assert summary["error"] == "job train-abc-1 died without an exit code: process 4242 is gone"
    assert len(errors) == 1


def test_ctrl_c(phase_env, capsys, monkeypatch):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(phase, "run_phase", interrupted)
    code, summary, errors = run_phase_cli(capsys)
    assert code == 130
    assert summary["ok"] is False and summary["error"] == INTERRUPTED
    assert len(errors) == 1 and errors[0].startswith("interrupted")


def test_an_unexpected_error_is_one_line_and_a_log_without_the_token(phase_env, capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise RuntimeError(f"boom near {TOKEN}\nsecond line")

    monkeypatch.setattr(phase, "run_phase", broken)
    code, summary, errors = run_phase_cli(capsys)
    assert code == EXIT_UNEXPECTED
    assert summary["ok"] is False and summary["error"] == "unexpected error (RuntimeError); see stderr"
    (line,) = errors
    assert line.startswith("error: unexpected error (RuntimeError: boom near [REDACTED]), a bug in tpu-sft")
    log_path = line.rsplit("the traceback is in ", 1)[1]
    logged = open(log_path).read()
    assert "Traceback" in logged and "in broken" in logged and "boom near [REDACTED]" in logged
    assert TOKEN not in logged and stat.S_IMODE(os.stat(log_path).st_mode) == 0o600
    os.remove(log_path)


def test_an_unexpected_error_in_any_verb_is_one_line(phase_env, capsys, monkeypatch):
    def broken(*args, **kwargs):
        raise ZeroDivisionError("division by zero")

    monkeypatch.setattr(toolkit_verbs, "target_from", broken)
    assert cli.main(["status", "some-job"]) == EXIT_UNEXPECTED
    out, err = capsys.readouterr()
    (line,) = err.strip().splitlines()
    assert line.startswith("error: unexpected error (ZeroDivisionError: division by zero)") and "Traceback" not in err
    os.remove(line.rsplit("the traceback is in ", 1)[1])


def test_a_job_that_ended_without_a_summary(tmp_path, capsys, monkeypatch):
    target = Target(host="127.0.0.1", user="tester", key_path="k", known_hosts="h", state_dir="/state")
    request = phase.PhaseRequest("train", target, PipelineConfig(profile="tiny"))
    monkeypatch.setattr(jobs, "follow", lambda *args, **kwargs: 137)  # the runner itself was kill -9'd
    claimed = Claimed("train-x-1", jobs.JobStatus("train-x-1", "running"), started=True, unfollowed=True)
    out = io.StringIO()
    assert phase._follow(request, claimed, out, conn=None) == 137
    summary = json.loads(out.getvalue().splitlines()[-1])
    assert summary == {
        "event": "summary",
        "phase": "train",
        "ok": False,
        "error": (
            "the job ended without a summary (killed by signal 9 (SIGKILL: the kernel's OOM killer sends this)); "
            "its log: /state/jobs/train-x-1/log"
        ),
    }
