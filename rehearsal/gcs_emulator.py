"""A real Cloud Storage JSON API on 127.0.0.1: `gcp-storage-emulator` (PyPI, pinned in requirements.txt), started
as its own process on a free port: the fresh-VM rehearsal's checkpoint bucket, and the checkpoint and publish
tests'. MaxText's gs:// paths reach it through the variables each client reads: tensorstore (orbax checkpoints)
TENSORSTORE_GCS_HTTP_URL; gcsfs and google-cloud-storage STORAGE_EMULATOR_HOST. Its contents are read over the
same HTTP API, with the standard library only. This address is anonymous and unchecked: the test's own view, as
the project's owner. A host's clients reach the bucket through rehearsal/storage_iam.py, which refuses what
their service account's roles do not allow."""

from __future__ import annotations

import json
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from rehearsal.sshd import free_port

EMULATOR = Path(sys.executable).parent / "gcp-storage-emulator"


def client_env(url: str) -> dict[str, str]:
    """What every Cloud Storage client on a host reads to reach the API at `url` instead of Google's."""
    return {
        "STORAGE_EMULATOR_HOST": url,
        "TENSORSTORE_GCS_HTTP_URL": url,
        # gcsfs otherwise probes each bucket for hierarchical namespaces and stalls ~60 s (DESIGN.md).
        "GCSFS_EXPERIMENTAL_ZB_HNS_SUPPORT": "false",
        "FSSPEC_GCS_TOKEN": "anon",
    }


@dataclass
class GcsEmulator:
    process: subprocess.Popen
    url: str
    bucket: str

    @property
    def env(self) -> dict[str, str]:
        return client_env(self.url)

    def status(self, path: str) -> int:
        """The HTTP status of a GET of `path` on the emulator itself."""
        try:
            with urllib.request.urlopen(f"{self.url}{path}", timeout=30) as response:
                return response.status
        except urllib.error.HTTPError as error:
            return error.code

    def gs(self, *parts: str) -> str:
        return "/".join([f"gs://{self.bucket}", *parts])

    def objects(self, prefix: str = "") -> dict[str, int]:
        """Object name → size under `prefix`, every page."""
        found, token = {}, None
        while True:
            query = {"prefix": prefix, **({"pageToken": token} if token else {})}
            with urllib.request.urlopen(
                f"{self.url}/storage/v1/b/{self.bucket}/o?{urllib.parse.urlencode(query)}", timeout=30
            ) as response:
                page = json.load(response)
            found.update({item["name"]: int(item["size"]) for item in page.get("items", [])})
            token = page.get("nextPageToken")
            if not token:
                return found

    def latest_checkpoint(self, prefix: str) -> int | None:
        """The last finished training checkpoint under `prefix`: on Cloud Storage orbax writes
        `commit_success.txt` into a step's directory once the step is complete."""
        steps = [
            int(parts[-2])
            for parts in (name.split("/") for name in self.objects(prefix))
            if len(parts) >= 3
            and parts[-1] == "commit_success.txt"
            and parts[-3] == "checkpoints"
            and parts[-2].isdigit()
        ]
        return max(steps, default=None)

    def download(self, prefix: str, dest: Path) -> None:
        """Every object under `prefix` into `dest`, as files named by the rest of the object name."""
        for name in self.objects(prefix):
            quoted = urllib.parse.quote(name, safe="")
            target = dest / name[len(prefix) :].lstrip("/")
            target.parent.mkdir(parents=True, exist_ok=True)
            with urllib.request.urlopen(
                f"{self.url}/storage/v1/b/{self.bucket}/o/{quoted}?alt=media", timeout=60
            ) as response:
                target.write_bytes(response.read())

    def upload(self, source: Path, prefix: str) -> None:
        """Every file under `source` as an object under `prefix`, named by its path below `source`. (The emulator
        fails a media upload of no bytes: an empty file is not for here.)"""
        for path in sorted(p for p in source.rglob("*") if p.is_file()):
            self.put("/".join([prefix, *path.relative_to(source).parts]), path.read_bytes())

    def put(self, name: str, data: bytes) -> None:
        """One object, `data` under `name` (not empty: see `upload`)."""
        query = urllib.parse.urlencode({"uploadType": "media", "name": name})
        request = urllib.request.Request(
            f"{self.url}/upload/storage/v1/b/{self.bucket}/o?{query}",
            data=data,
            headers={"Content-Type": "application/octet-stream"},
            method="POST",
        )
        with urllib.request.urlopen(request, timeout=60):
            pass

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


def start(bucket: str, log_path: Path | None = None) -> GcsEmulator:
    port = free_port("127.0.0.1")
    log = open(log_path, "w") if log_path else subprocess.DEVNULL
    process = subprocess.Popen(
        [str(EMULATOR), "start", "--host", "127.0.0.1", "--port", str(port), "--default-bucket", bucket, "--in-memory"],
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
    )
    emulator = GcsEmulator(process, f"http://127.0.0.1:{port}", bucket)
    deadline = time.monotonic() + 60
    while True:
        try:
            emulator.objects()
            return emulator
        except OSError:
            if process.poll() is not None or time.monotonic() > deadline:
                emulator.stop()
                raise RuntimeError(f"gcp-storage-emulator did not answer on {emulator.url} (log: {log_path})") from None
            time.sleep(0.2)


@contextmanager
def storage_emulator(bucket: str = "models") -> Iterator[str]:
    """The emulator for one test, with `bucket`; yields its base URL (for STORAGE_EMULATOR_HOST)."""
    emulator = start(bucket)
    try:
        yield emulator.url
    finally:
        emulator.stop()
