"""Fixtures for the real-MaxText tests: the tiny profile's converted model, and ONE tiny pipeline per session
(≈ 5 min on 2 cores) whose checkpoints go to gs:// on the IAM-enforcing Cloud Storage API (`gcs`,
tests/fixtures/cloud_storage.py), interrupted once during training and resumed from the bucket, that the tests
then inspect. The MaxText venv's Python and that API are every folder's (tests/fixtures/)."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from tests.workload.tiny_run import (
    TINY_SETTINGS,
    TinyPipeline,
    run_workload,
    start_and_kill_trainer_after_checkpoint,
)
from workload.run.layout import Layout

RUNS_PREFIX = "runs"
# What the tiny pipeline's trainer compiles (its training step, its sharded initial state), kept between suite
# runs as MaxText keeps ~/jax_cache, which the e2e run's trainer reads: the runs' bucket starts with it, so the
# first attempt loads them instead of compiling for minutes under the suite's load. That the cache in the bucket
# serves the next VM is the fresh-VM rehearsal's to show: its first VM always compiles. Cold, this is empty and
# the tiny pipeline compiles as before.
COMPILED = Path.home() / ".cache" / "tpu-sft" / "tiny-pipeline-jax-cache"


@pytest.fixture(scope="session")
def tiny_converted(maxtext_python, tmp_path_factory) -> Path:
    """A work dir where the tiny profile's assets and convert steps are done, for the tests that need the tiny model
    or its converted checkpoint but do not test making them (the tiny pipeline does): each costs ~25 s of CPU, a
    MaxText start among it. Built once per suite run, by the first xdist worker that needs it (session fixtures are
    per worker), under a lock that the others wait on. Use it read-only, or through `copy_converted`."""
    root = tmp_path_factory.getbasetemp()
    if os.environ.get("PYTEST_XDIST_WORKER"):
        root = root.parent  # the run's own base, above every worker's
    work = root / "tiny-converted"
    with open(root / "tiny-converted.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes, or when this worker dies
        if not (work / "markers" / "convert.json").is_file():
            config = root / "tiny-converted.json"
            config.write_text(json.dumps(TINY_SETTINGS))
            done = run_workload(maxtext_python, config, work, root / "tiny-converted-out", "--until", "convert")
            assert done.returncode == 0, f"{done.summary}\n{done.stderr[-3000:]}"
    return work


@pytest.fixture(scope="session")
def tiny_pipeline(maxtext_python, gcs, tmp_path_factory) -> TinyPipeline:
    tmp = tmp_path_factory.mktemp("tiny-pipeline")
    config, work, out = tmp / "settings.json", tmp / "work", tmp / "out"
    config.write_text(json.dumps(TINY_SETTINGS))
    cache = Layout("", "", "", "", runs_dir=RUNS_PREFIX).compile_cache_dir  # the trainer's, in the bucket
    assert cache is not None
    if COMPILED.is_dir():
        gcs.upload(COMPILED, cache)
    interrupted, checkpoint, kill = start_and_kill_trainer_after_checkpoint(
        maxtext_python, config, work, out, tmp, gcs, RUNS_PREFIX
    )
    # What a lost VM takes with it besides its scratch checkpoints: the runner's own step records. The resume
    # must find both in the bucket. (The converted checkpoint stays: re-converting on a new VM is covered by
    # the fresh-VM rehearsal.)
    shutil.rmtree(work / "train-metrics")
    finished = run_workload(maxtext_python, config, work, out, "--runs-dir", gcs.gs(RUNS_PREFIX))
    assert finished.returncode == 0, f"{finished.summary}\n{finished.stderr[-3000:]}"
    gcs.download(cache, COMPILED)
    print(
        f"\ntiny pipeline: interrupted run {interrupted.seconds:.0f} s, resumed run {finished.seconds:.0f} s",
        file=sys.stderr,
    )
    return TinyPipeline(config, work, out, gcs, RUNS_PREFIX, interrupted, checkpoint, kill, finished)
