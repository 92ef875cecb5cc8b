"""Fixtures for the real-MaxText tests: the MaxText venv, a local Cloud Storage API, and ONE tiny pipeline per
session (≈ 5 min on 2 cores) whose checkpoints go to gs:// on that API, interrupted once during training and
resumed from the bucket, that the tests then inspect."""

from __future__ import annotations

import json
import os
import shutil
import sys

import pytest

from rehearsal import gcs_emulator
from tests.workload.tiny_run import (
    MAXTEXT_PYTHON,
    TINY_SETTINGS,
    TinyPipeline,
    run_workload,
    start_and_kill_trainer_after_checkpoint,
)

RUNS_PREFIX = "runs"


@pytest.fixture(scope="session")
def maxtext_python() -> str:
    if not os.access(MAXTEXT_PYTHON, os.X_OK):
        pytest.fail(f"{MAXTEXT_PYTHON} is missing: run scripts/maxtext-venv (scripts/test does)")
    return str(MAXTEXT_PYTHON)


@pytest.fixture(scope="session")
def gcs(tmp_path_factory):
    """gcp-storage-emulator with one bucket; every child process (MaxText included) is pointed at it."""
    emulator = gcs_emulator.start("tpu-sft-runs", tmp_path_factory.mktemp("gcs") / "emulator.log")
    saved = {key: os.environ.get(key) for key in emulator.env}
    os.environ.update(emulator.env)
    yield emulator
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    emulator.stop()


@pytest.fixture(scope="session")
def tiny_pipeline(maxtext_python, gcs, tmp_path_factory) -> TinyPipeline:
    tmp = tmp_path_factory.mktemp("tiny-pipeline")
    config, work, out = tmp / "settings.json", tmp / "work", tmp / "out"
    config.write_text(json.dumps(TINY_SETTINGS))
    interrupted, checkpoint, kill = start_and_kill_trainer_after_checkpoint(maxtext_python, config, work, out, tmp,
                                                                            gcs, RUNS_PREFIX)
    # What a lost VM takes with it besides its scratch checkpoints: the runner's own step records. The resume
    # must find both in the bucket. (The converted checkpoint stays: re-converting on a new VM is covered by
    # the fresh-VM rehearsal.)
    shutil.rmtree(work / "train-metrics")
    finished = run_workload(maxtext_python, config, work, out, "--runs-dir", gcs.gs(RUNS_PREFIX))
    assert finished.returncode == 0, f"{finished.summary}\n{finished.stderr[-3000:]}"
    print(f"\ntiny pipeline: interrupted run {interrupted.seconds:.0f} s, resumed run {finished.seconds:.0f} s",
          file=sys.stderr)
    return TinyPipeline(config, work, out, gcs, RUNS_PREFIX, interrupted, checkpoint, kill, finished)
