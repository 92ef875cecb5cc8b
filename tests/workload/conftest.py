"""Fixtures for the real-MaxText tests: the MaxText venv, a local Cloud Storage API that enforces the IAM grants
the program declares for the VM's service account (rehearsal/storage_iam.py), and ONE tiny pipeline per
session (≈ 5 min on 2 cores) whose checkpoints go to gs:// on that API, interrupted once during training and
resumed from the bucket, that the tests then inspect."""

from __future__ import annotations

import fcntl
import json
import os
import shutil
import sys
from pathlib import Path

import pytest

from rehearsal import storage_iam
from rehearsal.fresh_vm.rehearse import CONFIG, identity_overrides
from rehearsal.run import record
from rehearsal.sshd import keygen
from tests.workload.tiny_run import (
    MAXTEXT_PYTHON,
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
def maxtext_python() -> str:
    if not os.access(MAXTEXT_PYTHON, os.X_OK):
        pytest.fail(f"{MAXTEXT_PYTHON} is missing: run scripts/maxtext-venv (scripts/test does)")
    return str(MAXTEXT_PYTHON)


@pytest.fixture(scope="session")
def declared_storage(tmp_path_factory) -> storage_iam.DeclaredStorage:
    """The checkpoint bucket, the VM's identity and its grants, as the rehearsal stack's program declares them."""
    key = keygen(tmp_path_factory.mktemp("stack-key") / "id_ed25519")
    stack, _ = record(CONFIG, identity_overrides(key))
    return storage_iam.DeclaredStorage.of(stack)


@pytest.fixture(scope="session")
def gcs(declared_storage, tmp_path_factory):
    """gcp-storage-emulator with the declared bucket; every child process (MaxText included) reaches it as the
    VM's service account, through the IAM stand-in. The fixture's own reads are the project owner's."""
    iam = storage_iam.start(declared_storage, tmp_path_factory.mktemp("gcs") / "emulator.log")
    emulator = iam.emulator
    client_env = iam.env(declared_storage.host)
    saved = {key: os.environ.get(key) for key in client_env}
    os.environ.update(client_env)
    yield emulator
    for key, value in saved.items():
        if value is None:
            os.environ.pop(key, None)
        else:
            os.environ[key] = value
    iam.stop()


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
