"""Fixtures for the real-MaxText tests: the MaxText venv, and ONE tiny pipeline per session (≈ 5 min on
2 cores), whose trainer is kill -9'd once after a checkpoint, then resumed, that the tests then inspect."""

from __future__ import annotations

import json
import os
import sys

import pytest

from tests.workload.tiny_run import (
    MAXTEXT_PYTHON,
    TINY_SETTINGS,
    TinyPipeline,
    run_workload,
    start_and_kill_trainer_after_checkpoint,
)


@pytest.fixture(scope="session")
def maxtext_python() -> str:
    if not os.access(MAXTEXT_PYTHON, os.X_OK):
        pytest.fail(f"{MAXTEXT_PYTHON} is missing: run scripts/maxtext-venv (scripts/test does)")
    return str(MAXTEXT_PYTHON)


@pytest.fixture(scope="session")
def tiny_pipeline(maxtext_python, tmp_path_factory) -> TinyPipeline:
    tmp = tmp_path_factory.mktemp("tiny-pipeline")
    config, work, out = tmp / "settings.json", tmp / "work", tmp / "out"
    config.write_text(json.dumps(TINY_SETTINGS))
    interrupted, checkpoint, kill = start_and_kill_trainer_after_checkpoint(maxtext_python, config, work, out, tmp)
    finished = run_workload(maxtext_python, config, work, out)
    assert finished.returncode == 0, f"{finished.summary}\n{finished.stderr[-3000:]}"
    print(f"\ntiny pipeline: interrupted run {interrupted.seconds:.0f} s, resumed run {finished.seconds:.0f} s",
          file=sys.stderr)
    return TinyPipeline(config, work, out, interrupted, checkpoint, kill, finished)
