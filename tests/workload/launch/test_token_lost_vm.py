"""A VM lost mid-training leaves no HF token behind (real MaxText 0.2.3, tiny profile, CPU, checkpoints in a local
Cloud Storage API): the runner is given a fake token the way the VM's runner gets one (`--hf-token-file`, the 0600
file `put-secret` writes under the state dir), and its whole session is SIGKILLed as soon as MaxText's first
TensorBoard event file holds MaxText's config, the earliest moment its config could have carried the token into
the bucket. The runner's masking after an attempt never runs, so only what MaxText itself wrote is on trial.
Then no file of the run, in the bucket, the work dir or the output dir, holds the token's bytes."""

from __future__ import annotations

import json
import os
import random
import signal
import string
import subprocess
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from tests.procs import outliving, processes
from tests.workload.tiny_run import REPO, STEP_LIMIT_S, TINY_SETTINGS, copy_converted, workload_argv

RUNS_PREFIX = "lost-vm-runs"  # its own prefix: the session's tiny pipeline writes the same run name under "runs"
CONFIG_TAG = b"hf_access_token"  # one of the config keys MaxText writes into TensorBoard, token or not
# What this run's trainer compiles (its training step, its sharded initial state), kept between suite runs as the
# tiny pipeline keeps its own (tests/workload/conftest.py COMPILED): the bucket starts with it, so the trainer loads
# them instead of compiling. Cold, this is empty and the trainer compiles.
COMPILED = Path.home() / ".cache" / "tpu-sft" / "token-run-jax-cache"


def fake_token() -> str:
    return "hf_" + "".join(random.choices(string.ascii_letters, k=34))


def event_files_holding_config(gcs, prefix: str) -> list[str]:
    names = [n for n in gcs.objects(prefix) if "/tensorboard/" in n and "events.out.tfevents" in n]
    return [n for n in names if CONFIG_TAG in object_bytes(gcs, n)]


def object_bytes(gcs, name: str) -> bytes:
    quoted = urllib.parse.quote(name, safe="")
    with urllib.request.urlopen(f"{gcs.url}/storage/v1/b/{gcs.bucket}/o/{quoted}?alt=media", timeout=60) as response:
        return response.read()


def kill_session(leader: int) -> None:
    """SIGKILL every process of the runner's session at once, as losing the VM ends them all."""
    for process in processes():
        if process["session"] == leader:
            try:
                os.kill(process["pid"], signal.SIGKILL)
            except ProcessLookupError:
                pass


def files_holding(root: Path, secret: bytes) -> list[str]:
    return [str(p) for p in root.rglob("*") if p.is_file() and not p.is_symlink() and secret in p.read_bytes()]


def test_a_vm_lost_right_after_the_first_tensorboard_file_leaves_no_token_in_any_file_of_the_run(
    maxtext_python, gcs, tiny_converted, tmp_path
):
    token = fake_token()
    secrets = tmp_path / "state" / "secrets"  # as ~/.tpu-sft/secrets on the VM: outside every directory of the run
    secrets.mkdir(parents=True, mode=0o700)
    token_file = secrets / "hf_token"
    token_file.write_text(token)
    token_file.chmod(0o600)
    config, work, out = tmp_path / "settings.json", tmp_path / "work", tmp_path / "out"
    # Converted without the token: what MaxText's convert writes on a host that has one is the e2e run's to search.
    copy_converted(tiny_converted, work)
    # No held-out pass: the one before training would start a data worker process (a GiB or more) for nothing here.
    # One step: MaxText writes its event file to a bucket only when training ends (the writer flushes every 120 s
    # or on close), so every step before it, and its checkpoint's upload, would be CPU for nothing here too.
    config.write_text(json.dumps({**TINY_SETTINGS, "evalInterval": 0, "steps": 1}))
    argv = workload_argv(
        maxtext_python,
        config,
        work,
        out,
        "--until",
        "train",
        "--runs-dir",
        gcs.gs(RUNS_PREFIX),
        "--hf-token-file",
        str(token_file),
    )
    cache = f"{RUNS_PREFIX}/jax-cache"  # the trainer's (workload/run/layout.py compile_cache_dir)
    if COMPILED.is_dir():
        gcs.upload(COMPILED, cache)
    stdout = open(tmp_path / "runner.stdout", "w+b")
    env = {k: v for k, v in os.environ.items() if k not in ("HF_TOKEN", "HF_TOKEN_PATH")}
    runner = subprocess.Popen(
        argv,
        cwd=REPO,
        stdout=stdout,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        start_new_session=True,
    )
    started = time.monotonic()
    try:
        while not event_files_holding_config(gcs, RUNS_PREFIX):
            if runner.poll() is not None:
                stdout.seek(0)
                pytest.fail(
                    f"the runner ended (exit {runner.returncode}) before a TensorBoard file:\n"
                    f"{stdout.read().decode(errors='replace')[-3000:]}"
                )
            if time.monotonic() - started > STEP_LIMIT_S:
                pytest.fail("no TensorBoard file holding MaxText's config within the time limit")
            time.sleep(0.5)
    finally:  # the VM is lost: right after the first event file holding the config, or when the test gives up
        kill_session(runner.pid)
        runner.wait()
    assert not outliving(lambda p: p["session"] == runner.pid), "the lost VM's processes must all be gone"

    secret = token.encode()
    bucket_copy = tmp_path / "bucket"
    gcs.download(RUNS_PREFIX, bucket_copy)
    holding = files_holding(bucket_copy, secret) + files_holding(work, secret) + files_holding(out, secret)
    holding += [str(stdout.name)] if secret in Path(stdout.name).read_bytes() else []
    assert holding == [], f"the token's bytes are in {holding}"
    assert any("/tensorboard/" in str(p) for p in bucket_copy.rglob("events.out.tfevents*"))
    gcs.download(cache, COMPILED)
