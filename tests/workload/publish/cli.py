"""Running `python -m workload.publish` from tests as the VM runs it (in the MaxText venv) against a Cloud Storage
emulator reached through STORAGE_EMULATOR_HOST, and reading that emulator back over its HTTP API."""

from __future__ import annotations

import json
import os
import subprocess
import urllib.parse
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]


def publish(maxtext_python: str, host: str, model: Path | str, *extra: str) -> tuple[int, dict]:
    """The publish CLI's exit code and its summary (its last stdout line)."""
    env = {**os.environ, "STORAGE_EMULATOR_HOST": host, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [maxtext_python, "-m", "workload.publish", str(model), *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1])


def objects(host: str, bucket: str = "models") -> dict[str, dict]:
    with urllib.request.urlopen(f"{host}/storage/v1/b/{bucket}/o") as response:
        return {o["name"]: o for o in json.load(response).get("items", [])}


def download(host: str, name: str, bucket: str = "models") -> bytes:
    url = f"{host}/download/storage/v1/b/{bucket}/o/{urllib.parse.quote(name, safe='')}?alt=media"
    with urllib.request.urlopen(url) as response:
        return response.read()
