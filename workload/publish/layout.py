"""Where a kept model's files go when published: the Hugging Face export (`hf-model/` in the kept directory) at
the destination's root, so `AutoModelForCausalLM.from_pretrained("OWNER/NAME")` finds config.json, the weights and
the tokenizer without `subfolder=` (the config and weights as the text-only model's: workload/publish/text_only.py);
the model card beside it as README.md (the Hub shows it as the repo's card); everything else the run kept (loss
curve, verify.json, samples, metrics, TensorBoard files, the manifest) under `tpu-sft/`, where a later publish
reads the manifest to tell an unchanged model."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

MODEL_DIR = "hf-model/"
RUN_DIR = "tpu-sft/"
CARD = "README.md"
MANIFEST = RUN_DIR + "manifest.json"


def destination_path(kept_path: str) -> str:
    """Where the kept directory's file `kept_path` goes."""
    if kept_path.startswith(MODEL_DIR):
        return kept_path.removeprefix(MODEL_DIR)
    return RUN_DIR + kept_path


@dataclass(frozen=True)
class Item:
    """One file to publish: where it goes at the destination, and a local file or the bytes themselves."""

    path: str
    source: str | bytes
    size: int
    sha256: str

    @classmethod
    def of_bytes(cls, path: str, data: bytes) -> "Item":
        return cls(path, data, len(data), hashlib.sha256(data).hexdigest())
