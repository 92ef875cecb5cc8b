"""gcp-storage-emulator, a real Cloud Storage JSON API server, on a free loopback port for one test."""

from __future__ import annotations

import subprocess
import sys
import urllib.request
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from rehearsal.sshd import free_port
from tests.remote.ssh_testbed import wait_until

EMULATOR = Path(sys.executable).parent / "gcp-storage-emulator"


@contextmanager
def storage_emulator(bucket: str = "models") -> Iterator[str]:
    """Starts the emulator with `bucket` in memory; yields its base URL (for STORAGE_EMULATOR_HOST)."""
    port = free_port("127.0.0.1")
    process = subprocess.Popen([str(EMULATOR), "start", "--port", str(port), "--in-memory", "-q",
                                "--default-bucket", bucket], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    host = f"http://127.0.0.1:{port}"

    def answers() -> bool:
        try:
            with urllib.request.urlopen(f"{host}/storage/v1/b/{bucket}", timeout=1):
                return True
        except OSError:
            return False

    try:
        wait_until(answers, timeout=20.0, what="the storage emulator")
        yield host
    finally:
        process.kill()
        process.wait()
