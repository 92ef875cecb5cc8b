"""A Hugging Face Hub destination for `python -m workload.publish`: a model repo (created private unless asked
otherwise), one commit per file so that an interrupted upload keeps what arrived, manifest.json last.

What is already there is read from the Hub's paths-info: large (LFS) files by their sha256, small ones by their
git blob id. huggingface_hub (the MaxText venv's, pinned) does the talking; HF_ENDPOINT points it elsewhere
(tests). The token is handed to the client object only.
"""

from __future__ import annotations

import hashlib
from typing import Any

MANIFEST = "manifest.json"


def git_blob_id(data: bytes) -> str:
    """The id git (and the Hub's paths-info `blob_id`) gives a file's content."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class HubDestination:
    def __init__(self, repo: str, *, token: str | None, private: bool):
        from huggingface_hub import HfApi  # the MaxText venv has it; the Pulumi program never imports this module

        self.repo = repo
        self.api = HfApi(token=token)
        self.api.create_repo(repo, private=private, exist_ok=True)

    def _stored(self, path: str) -> Any:
        found = self.api.get_paths_info(self.repo, [path], expand=False)
        return found[0] if found else None

    def has_manifest(self, data: bytes) -> bool:
        stored = self._stored(MANIFEST)
        return stored is not None and stored.lfs is None and stored.blob_id == git_blob_id(data)

    def has(self, local_path: str, entry: dict[str, Any]) -> bool:
        stored = self._stored(entry["path"])
        if stored is None:
            return False
        if stored.lfs is not None:
            return stored.lfs.sha256 == entry["sha256"] and stored.lfs.size == entry["size"]
        with open(local_path, "rb") as f:
            return stored.blob_id == git_blob_id(f.read())

    def upload(self, local_path: str, entry: dict[str, Any]) -> None:
        self.api.upload_file(
            path_or_fileobj=local_path,
            path_in_repo=entry["path"],
            repo_id=self.repo,
            commit_message=f"tpu-sft: add {entry['path']}",
        )

    def upload_manifest(self, data: bytes) -> None:
        self.api.upload_file(
            path_or_fileobj=data,
            path_in_repo=MANIFEST,
            repo_id=self.repo,
            commit_message="tpu-sft: publish (manifest last: the model is complete)",
        )
