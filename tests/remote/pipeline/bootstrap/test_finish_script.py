"""A run started beside the install steps bootstrap left detached finishes them itself before train: the host script
does what the train task's `finish_detached` does (waits for each step's lock, skips one done, runs one that failed
again), run here by /bin/sh against a home of its own."""

from __future__ import annotations

import os
import subprocess

from remote.pipeline.bootstrap.scheduler import finish_script
from remote.pipeline.bootstrap.spec import BootstrapSpec, Step
from remote.ssh.target import Target


def _run(script: str, home) -> subprocess.CompletedProcess:
    return subprocess.run(["sh", "-c", script], env={**os.environ, "HOME": str(home)}, capture_output=True, text=True)


def test_the_script_runs_a_step_not_done_once_and_fails_with_a_failing_one(tmp_path):
    target = Target(host="vm", user="tester", key_path="k", known_hosts="kh", state_dir=".tpu-sft")
    extras = Step("extras", 'echo built >> "$HOME/built" && [ -n "$SPEC_ENV" ]', detached=True)
    spec = BootstrapSpec((Step("venv", "true"), extras), env={"SPEC_ENV": "given"})
    (tmp_path / ".tpu-sft" / "bootstrap" / "locks").mkdir(parents=True)
    (tmp_path / ".tpu-sft" / "bootstrap" / "done").mkdir(parents=True)
    script = finish_script(target, spec, (extras,))
    assert _run(script, tmp_path).returncode == 0
    assert _run(script, tmp_path).returncode == 0  # done: skipped
    assert (tmp_path / "built").read_text() == "built\n"

    failing = Step("extras", "exit 7", detached=True)
    broken = BootstrapSpec((Step("venv", "true"), failing))
    assert _run(finish_script(target, broken, (failing,)), tmp_path).returncode != 0
