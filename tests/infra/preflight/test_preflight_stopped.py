"""Stopping `python -m infra.preflight` with SIGTERM (a cancelled CI job, a closed terminal) stops the compile it
started: a libtpu compile is a child process that would otherwise run on for minutes. The compile is a stand-in
script here ($PREFLIGHT_PYTHON): only the parent's handling is under test, and it needs no MaxText."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from infra.preflight import compile_step

REPO = Path(__file__).resolve().parents[3]


def test_sigterm_stops_the_compile_it_started(tmp_path):
    pid_file = tmp_path / "compile.pid"
    standin = tmp_path / "python"
    standin.write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 300\n")
    standin.chmod(0o755)
    steps = 1000 + uuid.uuid4().int % 10**6  # train inputs no earlier preflight has a record of
    proc = subprocess.Popen(
        [sys.executable, "-m", "infra.preflight", "Pulumi.dev.yaml", f"tpu-sft:steps={steps}"],
        cwd=REPO,
        env={**os.environ, "PREFLIGHT_PYTHON": str(standin)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while not pid_file.exists() or not pid_file.read_text().strip():
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.1)
    compile_pid = int(pid_file.read_text())
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    try:
        os.kill(compile_pid, 0)
        outlived = True
        os.kill(compile_pid, signal.SIGKILL)  # not left behind by this test either
    except ProcessLookupError:
        outlived = False
    assert not outlived, f"the compile (pid {compile_pid}) outlived the preflight that started it"
    assert proc.returncode == 128 + signal.SIGTERM
    assert err.strip().splitlines()[-1] == "preflight: stopped (SIGTERM); the compile is stopped too"


def test_a_sigterm_while_the_compile_starts_stops_it_too(tmp_path, monkeypatch):
    """The SIGTERM comes after the compile's process exists and before starting it returned (under load the test
    above once sent it there): the compile still ends with the preflight."""
    standin = tmp_path / "python"
    standin.write_text("#!/bin/sh\nexec sleep 30\n")  # were the SIGTERM lost, the test would fail in 30 s
    standin.chmod(0o755)
    started = []
    popen = subprocess.Popen

    def popen_then_sigterm(*args, **kwargs):
        process = popen(*args, **kwargs)
        started.append(process)
        os.kill(os.getpid(), signal.SIGTERM)  # its handler runs here, inside the start
        return process

    previous = signal.getsignal(signal.SIGTERM)
    monkeypatch.setattr(compile_step.subprocess, "Popen", popen_then_sigterm)
    compile_step.stop_on_sigterm()
    try:
        with pytest.raises(SystemExit) as stopped:
            compile_step.run_compile([str(standin)])
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert stopped.value.code == 128 + signal.SIGTERM
    [process] = started
    assert process.poll() == -signal.SIGKILL  # the compile did not outlive it
    assert compile_step._Sigterm.held is None  # and the signal was acted on once
