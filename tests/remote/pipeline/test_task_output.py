"""What `pulumi up` shows of a phase task, as pulumi-command 1.2.1 shows it (rehearsal/pulumi_display.py): while it
runs, its last status line names the live view and the whole log; when it fails, its error is its reason and that
log's path in at most 5 lines, however much it printed; when it succeeds, its outcome line and summary are on stdout.
Every progress line, its stderr and its log messages are in the whole log."""

from __future__ import annotations

import json
import logging
import sys

import pytest

from rehearsal.pulumi_display import StatusLine, failure
from remote import cli
from remote.pipeline import phase
from remote.ssh.errors import EXIT_UNREACHABLE, Unreachable
from workload.core.contract import phase_command

PROGRESS = [f"train step {n}/500 · loss {3 - n / 500:.4f}" for n in range(1, 501)]


@pytest.fixture
def task_env(unreachable_target, tmp_path, monkeypatch):
    monkeypatch.setenv("TPU_SFT_TARGET", json.dumps({**unreachable_target, "task_logs": str(tmp_path / "logs")}))
    return tmp_path / "logs" / "train.log"


def shown(capsys, code: int) -> tuple[str, str, str]:
    """The error pulumi-command would return for this run, its last status line, and its stdout."""
    out, err = capsys.readouterr()
    status = StatusLine()
    for line in (out + err).splitlines():
        status.line(line)
    return failure(phase_command("train"), code, out, err), status.text, out


def progress_then(summary: dict, code: int):
    def run(request, out, hf_token=None):
        for line in PROGRESS:
            print(line, file=out)
        print("a warning on stderr", file=sys.stderr)
        logging.getLogger("remote").warning("a log message")
        print(json.dumps(summary), file=out)
        return code

    return run


def test_a_failed_phase_shows_its_reason_and_whole_log_in_at_most_five_lines(task_env, capsys, monkeypatch):
    reason = "train: exit code 1: RESOURCE_EXHAUSTED: Out of memory while trying to allocate 9.1G"
    summary = {"event": "summary", "ok": False, "failed_step": "train", "error": reason, "logs": ["/x/train.log"]}
    monkeypatch.setattr(phase, "run_phase", progress_then(summary, 1))
    code = cli.main(["phase", "train"])
    error, _, out = shown(capsys, code)
    assert code == 1
    assert len(error.splitlines()) <= 5, error
    assert reason in error and str(task_env) in error
    assert json.loads(out.splitlines()[-1]) == summary  # the stack outputs' line stays last
    whole = task_env.read_text()
    assert all(line in whole for line in PROGRESS)
    assert "a warning on stderr" in whole and "a log message" in whole


def test_a_phase_that_raises_shows_its_reason_and_whole_log_too(task_env, capsys, monkeypatch):
    def unreachable(request, out, hf_token=None):
        print("\n".join(PROGRESS), file=out)
        raise Unreachable("127.0.0.1", "no SSH answer within 900 s")

    monkeypatch.setattr(phase, "run_phase", unreachable)
    code = cli.main(["phase", "train"])
    error, _, out = shown(capsys, code)
    assert code == EXIT_UNREACHABLE
    assert len(error.splitlines()) <= 5, error
    assert "no SSH answer within 900 s" in error and str(task_env) in error
    assert json.loads(out.splitlines()[-1])["ok"] is False


def test_while_it_runs_the_status_names_the_live_view_and_the_whole_log(task_env, capsys, monkeypatch):
    seen: list[str] = []

    def watched(request, out, hf_token=None):
        seen.append(capsys.readouterr().out)  # what pulumi-command has been shown so far
        return progress_then({"event": "summary", "ok": True, "until": "train", "tokens_per_s": 5123.4}, 0)(
            request, out
        )

    monkeypatch.setattr(phase, "run_phase", watched)
    assert cli.main(["phase", "train"]) == 0
    [so_far] = seen
    assert so_far == f"train: live view `scripts/tpu-sft logs`; whole log: {task_env}\n"
    _, status, out = shown(capsys, 0)
    assert out.splitlines()[0] == "✓ train: 5,123 tokens/s"  # its outcome, then the summary
    assert json.loads(status)["tokens_per_s"] == 5123.4


def test_without_task_logs_a_phase_prints_everything_on_stdout(unreachable_target, tmp_path, capsys, monkeypatch):
    """A phase run by hand, and the tests' own runs of it, as before."""
    monkeypatch.setattr(phase, "run_phase", progress_then({"event": "summary", "ok": False, "error": "x"}, 1))
    cli.main(["phase", "train"])
    out, _ = capsys.readouterr()
    assert out.splitlines()[:-1] == PROGRESS and not (tmp_path / "logs").exists()
