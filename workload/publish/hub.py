"""A Hugging Face Hub destination for `python -m workload.publish`: a model repo (created private unless asked
otherwise), everything that changed sent in ONE commit (huggingface_hub's `create_commit`), so the repo holds
either the previous model or this whole one, never a mix, and a reader at any revision can load it.

What resumes after an interrupted publish: not the commit, which the Hub applies whole or not at all, but the
large files' uploads. `create_commit` first uploads every LFS file's content through the Hub's LFS batch API,
which answers "already have it" for a sha256 it holds, so a second attempt sends no large file that reached the
Hub before the first one broke, then commits. Files the repo already has with the same content (an unchanged
tokenizer under a new model) are left out of the commit.

What is already there is read from the Hub's paths-info: large (LFS) files by their sha256, small ones by their
git blob id. huggingface_hub (the MaxText venv's, pinned) does the talking; HF_ENDPOINT points it elsewhere
(tests). The token is handed to the client object only.
"""

from __future__ import annotations

import hashlib
from typing import Any

from workload.publish.layout import Item


def git_blob_id(data: bytes) -> str:
    """The id git (and the Hub's paths-info `blob_id`) gives a file's content."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


class HubDestination:
    def __init__(self, repo: str, *, token: str | None, private: bool):
        from huggingface_hub import HfApi  # the MaxText venv has it; the Pulumi program never imports this module

        self.repo = repo
        self.api = HfApi(token=token)
        self.api.create_repo(repo, private=private, exist_ok=True)

    def _stored(self, items: list[Item]) -> dict[str, Any]:
        if not items:
            return {}
        return {found.path: found for found in self.api.get_paths_info(self.repo, [i.path for i in items])}

    def has_manifest(self, manifest: Item) -> bool:
        return bool(self.present([manifest]))

    def present(self, items: list[Item]) -> set[str]:
        stored = self._stored(items)
        return {item.path for item in items if item.path in stored and _same(stored[item.path], item)}

    def send(self, items: list[Item], manifest: Item) -> None:
        from huggingface_hub import CommitOperationAdd

        operations = [CommitOperationAdd(path_in_repo=i.path, path_or_fileobj=i.source) for i in [*items, manifest]]
        self.api.create_commit(
            self.repo,
            operations=operations,
            commit_message=f"tpu-sft: publish {len(items)} file(s) and {manifest.path}",
        )


def _same(stored: Any, item: Item) -> bool:
    if stored.lfs is not None:
        return stored.lfs.sha256 == item.sha256 and stored.lfs.size == item.size
    if stored.size != item.size:
        return False
    if isinstance(item.source, bytes):
        return stored.blob_id == git_blob_id(item.source)
    with open(item.source, "rb") as f:  # a regular (non-LFS) file: small, so read whole
        return stored.blob_id == git_blob_id(f.read())
