"""A Cloud Storage destination for `python -m workload.publish`: gs://BUCKET/PREFIX/<file>, each object carrying
the sha256 the manifest gives it (custom metadata `sha256`), so a later attempt can tell a file already there
from one that differs without downloading it.

Credentials: google-cloud-storage's defaults, i.e. on the VM its service account's token from the metadata
server. That account needs roles/storage.objectUser on the bucket (the program grants nothing there): it reads
objects' metadata (storage.objects.get), and publishing a new model where an older one is replaces objects,
which Google allows only with storage.objects.delete besides storage.objects.create — objectCreator with
objectViewer fails there with a 403 (tests/workload/test_publish_bucket_iam.py). STORAGE_EMULATOR_HOST points
it at an emulator (tests).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

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

    def has_manifest(self, data: bytes) -> bool:
        blob = self._bucket.get_blob(self._name("manifest.json"))
        return blob is not None and blob.size == len(data) and blob.download_as_bytes() == data

    def has(self, local_path: str, entry: dict[str, Any]) -> bool:
        blob = self._bucket.get_blob(self._name(entry["path"]))
        return blob is not None and blob.size == entry["size"] and (blob.metadata or {}).get(SHA_KEY) == entry["sha256"]

    def upload(self, local_path: str, entry: dict[str, Any]) -> None:
        blob = self._bucket.blob(self._name(entry["path"]))
        blob.metadata = {SHA_KEY: entry["sha256"]}
        blob.upload_from_filename(local_path)

    def upload_manifest(self, data: bytes) -> None:
        self._bucket.blob(self._name("manifest.json")).upload_from_string(data, content_type="application/json")
