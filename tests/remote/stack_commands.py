"""What the tests of `scripts/tpu-sft` (remote/stack/) share: the stack's commands run against its outputs (the
mock engine's record: `recorded` in tests/remote/stack/conftest.py) through the `pulumi` stand-in, a run's event
lines and a small kept model with its manifest.

The commands run as the script runs them, `python -m remote.stack` in the project directory, with the Python running
the tests: the script's own `.venv` need not be this checkout's (tests/remote/stack/test_stack_commands.py checks the
script itself)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

from tests.remote.pulumi_standin import DEFAULT, install
from tests.ssh_testbed import wait_until
from workload.run.fingerprint import manifest

REPO = Path(__file__).resolve().parents[2]
SCRIPT = REPO / "scripts" / "tpu-sft"
STACK_COMMANDS = (sys.executable, "-m", "remote.stack")  # what SCRIPT execs, from REPO


def standing_at(outputs: dict[str, Any], target, **more: Any) -> dict[str, Any]:
    """The stack's outputs with its VM standing at `target` (a test sshd), as the rehearsal's host stands for it."""
    return {**outputs, "target": target.to_json(), **more}


def tpu_sft(
    tmp: Path,
    outputs: dict[str, Any] | None,
    *args: str,
    env: dict[str, str] | None = None,
    timeout: float = 120,
    passphrase: str | None = None,
) -> subprocess.CompletedProcess:
    """`scripts/tpu-sft ARGS` (STACK_COMMANDS) with `pulumi` answering `outputs` for the selected stack (None: no stack
    at all), whose secrets are under `passphrase` if one is given. PATH holds the stand-ins only: this machine's gcloud
    (not logged in) is not asked."""
    stacks = {} if outputs is None else {DEFAULT: outputs}
    bin_dir = install(tmp / "bin", stacks, {DEFAULT: passphrase} if passphrase is not None else None)
    return subprocess.run(
        [*STACK_COMMANDS, *args],
        capture_output=True,
        text=True,
        cwd=REPO,
        env={"PATH": str(bin_dir), "HOME": os.environ.get("HOME", "/root"), **(env or {})},
        timeout=timeout,
    )


def follow_logs(tmp: Path, outputs: dict[str, Any], seen: str, release: Callable[[], None]) -> tuple[int, str, str]:
    """`scripts/tpu-sft logs -f` in the background until its output shows `seen`, then `release()` (the run goes on
    to its end): its exit code, stdout and stderr once it has ended."""
    out = tmp / "follow.out"
    with open(out, "w") as stdout:
        follow = subprocess.Popen(
            [*STACK_COMMANDS, "logs", "-f"],
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env={"PATH": str(install(tmp / "bin", {DEFAULT: outputs})), "HOME": os.environ.get("HOME", "/root")},
        )
        wait_until(lambda: seen in out.read_text(), what=f"{seen!r} followed")
        release()
        _, err = follow.communicate(timeout=60)
    return follow.returncode, out.read_text(), err


def event(kind: str, **fields: Any) -> str:
    return json.dumps({"event": kind, "t": 1764900000.0, **fields})


RUNNING = [
    event("phase", phase="convert", status="done", seconds=12.0),
    event("phase", phase="train", status="start", reason="not done yet"),
    event("step", phase="train", step=3, steps=10, loss=1.2345, step_seconds=1.0, eta_s=70.0),
]
FINISHED = [
    event("phase", phase="train", status="done", seconds=30.0),
    event("phase", phase="keep", status="done", seconds=1.0),
    event("summary", ok=True, until="keep", final_step=10, final_loss=1.1, kept_dir="/kept/run-a", failed_step=None),
]


def kept_model(root: Path, run: str = "run-a", size: int = 3 << 20) -> Path:
    """A kept model as the keep step leaves it (workload/run/kept.py): a few files, then manifest.json with each
    file's size and sha256."""
    model = root / run
    (model / "hf-model").mkdir(parents=True)
    (model / "hf-model" / "model.safetensors").write_bytes(os.urandom(size))
    (model / "hf-model" / "config.json").write_text('{"model_type": "gemma3"}\n')
    (model / "loss.png").write_bytes(b"\x89PNG fake")
    files = manifest(str(model), hashes=True)
    (model / "manifest.json").write_text(json.dumps({"run_name": run, "files": files, "steps": {}}))
    return model


def fetch_resuming_a_partial_file(tmp: Path, outputs: dict[str, Any], model: Path, source: str, env: dict) -> Path:
    """`fetch-model` into a folder that holds the first 1000 bytes of the weights, as a broken transfer leaves them:
    the fetch continues that file, every file arrives whole and checked, and a second fetch fetches nothing.
    Returns the folder."""
    dest = tmp / "model"
    weights = (model / "hf-model" / "model.safetensors").read_bytes()
    (dest / "hf-model").mkdir(parents=True)
    (dest / "hf-model" / ".model.safetensors.partial").write_bytes(weights[:1000])
    result = tpu_sft(tmp, outputs, "fetch-model", str(dest), env=env)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == (
        f"the model from {source} is in {dest}: 3 files match its manifest "
        "(3 fetched now, 1 of them resumed; the rest were here already)"
    )
    for path in ("hf-model/model.safetensors", "hf-model/config.json", "loss.png", "manifest.json"):
        assert (dest / path).read_bytes() == (model / path).read_bytes(), path
    assert not list(dest.rglob("*.partial"))
    again = tpu_sft(tmp, outputs, "fetch-model", str(dest), env=env)
    assert "(0 fetched now, 0 of them resumed" in again.stdout
    return dest
