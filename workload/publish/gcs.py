"""A Cloud Storage destination for `python -m workload.publish`: gs://BUCKET/PREFIX/<path in the repo layout>, each
object carrying its sha256 (custom metadata `sha256`), so a later attempt can tell a file already there from one
that differs without downloading it. One object at a time, tpu-sft/manifest.json last: an interrupted upload
keeps the objects that arrived, and the next attempt skips them.

Credentials: google-cloud-storage's defaults, i.e. on the VM its service account's token from the metadata
server (the program grants it roles/storage.objectUser on the bucket, infra/resources/publish.py), and where
`scripts/tpu-sft publish` runs it, that machine's Application Default Credentials. That role because it reads
objects' metadata (storage.objects.get), and publishing a new model where an older one is replaces objects,
which Google allows only with storage.objects.delete besides storage.objects.create — objectCreator with
objectViewer fails there with a 403 (tests/workload/publish/test_publish_bucket_iam.py). STORAGE_EMULATOR_HOST points
it at an emulator (tests).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from workload.publish.layout import Item

SHA_KEY = "sha256"


def split_uri(uri: str) -> tuple[str, str]:
    bucket, _, prefix = uri.removeprefix("gs://").partition("/")
    if not uri.startswith("gs://") or not bucket:
        raise ValueError(f"{uri!r} is not a gs://BUCKET/PATH address")
    return bucket, prefix.strip("/")


@dataclass
class GcsDestination:
    uri: str
    _bucket: Any = field(default=None, repr=False)

    def __post_init__(self) -> None:
        from google.cloud import storage  # the MaxText venv has it; the Pulumi program never imports this module

        bucket, self.prefix = split_uri(self.uri)
        self._bucket = storage.Client().bucket(bucket)

    def _name(self, path: str) -> str:
        return f"{self.prefix}/{path}" if self.prefix else path

    def has_manifest(self, manifest: Item) -> bool:
        blob = self._bucket.get_blob(self._name(manifest.path))
        return blob is not None and blob.size == manifest.size and blob.download_as_bytes() == manifest.source

    def present(self, items: list[Item]) -> set[str]:
        found = set()
        for item in items:
            blob = self._bucket.get_blob(self._name(item.path))
            if blob is not None and blob.size == item.size and (blob.metadata or {}).get(SHA_KEY) == item.sha256:
                found.add(item.path)
        return found

    def send(self, items: list[Item], manifest: Item) -> None:
        for item in [*items, manifest]:
            self.upload(item)

    def upload(self, item: Item) -> None:
        blob = self._bucket.blob(self._name(item.path))
        blob.metadata = {SHA_KEY: item.sha256}
        if isinstance(item.source, bytes):
            blob.upload_from_string(item.source, content_type=_content_type(item.path))
        else:
            blob.upload_from_filename(item.source)


def _content_type(path: str) -> str:
    # The Cloud Console and gcloud show README.md and the manifest as text rather than as a download.
    return "application/json" if path.endswith(".json") else "text/markdown; charset=utf-8"
