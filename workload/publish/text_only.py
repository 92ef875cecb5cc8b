"""The published model is Gemma 3's language model alone, a `gemma3_text` model that transformers loads as
`Gemma3ForCausalLM` with every weight present, because that is what tpu-sft trains and keeps.

MaxText 0.2.2's `to_huggingface` (use_multimodal=False, as the export runs it) writes a `Gemma3Config`
(`Gemma3ForConditionalGeneration`, with `vision_config`) but only the language model's weights
(`model.language_model.*`): loaded as it is, transformers builds a vision tower and a projector that no file holds
and initialises them at random, with a missing-weights warning, and `AutoModelForCausalLM` picks the image-text
class. Carrying the base model's vision weights through instead would publish a tower that SFT on text never saw
run with the fine-tuned language model, and would need the base model's weights on the VM at publish time. So the
export is published text-only, the way Google publishes its own text-only Gemma 3 (google/gemma-3-1b-it loads as
`Gemma3ForCausalLM`):

- `config.json` becomes the export's `text_config` (model_type `gemma3_text`), architecture `Gemma3ForCausalLM`,
  with the whole model's `dtype`, `eos_token_id` and `transformers_version`;
- each `*.safetensors` file keeps its tensors byte for byte; only the names in its header change,
  `model.language_model.X` → `model.X`, the names Gemma3ForCausalLM loads (weights of no text module, which a
  MaxText export does not have, are left out);
- `model.safetensors.index.json` (a sharded export) names the same tensors the same new way.

The kept export itself is unchanged: verify (workload/measure/verify_hf.py) and the logit parity check load it as
MaxText wrote it. The published `tpu-sft/manifest.json` lists the rewritten files as published (so `fetch-model`
checks a published copy against it) and keeps what keep recorded of them under `text_only`.
"""

from __future__ import annotations

import hashlib
import json
import os
import struct
from typing import Any

from workload.publish.layout import Item, destination_path

CONFIG = "config.json"
INDEX = "model.safetensors.index.json"
WEIGHTS_SUFFIX = ".safetensors"
ARCHITECTURE = "Gemma3ForCausalLM"
TEXT_MODEL_TYPE = "gemma3_text"
# The language model's weights as to_huggingface names them (maxtext checkpoint_conversion/utils/param_mapping.py),
# and as transformers 5 saves a Gemma3ForConditionalGeneration (its legacy names), → what Gemma3ForCausalLM loads.
TEXT_PREFIXES = {
    "model.language_model.": "model.",
    "language_model.model.": "model.",
    "language_model.lm_head.": "lm_head.",
}
WHOLE_MODEL_KEYS = ("dtype", "eos_token_id", "transformers_version")  # the export's, over its text_config's
_CHUNK = 1 << 24


class NotGemma3(ValueError):
    """The export is not the Gemma 3 that MaxText writes: one line saying what was found."""


def needs_rewrite(config: dict[str, Any]) -> bool:
    """An image-text Gemma 3 config (what to_huggingface writes) is rewritten; a text-only one is already right."""
    if config.get("model_type") == TEXT_MODEL_TYPE:
        return False
    if config.get("model_type") != "gemma3" or not isinstance(config.get("text_config"), dict):
        raise NotGemma3(
            f"the export's config.json is a {config.get('model_type')!r} model without a Gemma 3 text_config; "
            "re-run the export phase"
        )
    return True


def text_config(config: dict[str, Any]) -> dict[str, Any]:
    """The export's config as a text-only Gemma 3's."""
    text = dict(config["text_config"])
    text.update({key: config[key] for key in WHOLE_MODEL_KEYS if key in config})
    text.update(model_type=TEXT_MODEL_TYPE, architectures=[ARCHITECTURE])
    return dict(sorted(text.items()))


def text_name(name: str) -> str | None:
    """A weight's name in the text-only model, or None for a weight of no text module."""
    for prefix, text_prefix in TEXT_PREFIXES.items():
        if name.startswith(prefix):
            return text_prefix + name.removeprefix(prefix)
    return name if name.startswith("lm_head.") else None


def rename_weights(source: str, target: str) -> tuple[int, str]:
    """Writes `source` (a safetensors file) to `target` with text-only names; (size, sha256) of what it wrote.

    safetensors is an 8-byte little-endian header length, a JSON header (each tensor's dtype, shape and byte offsets
    into the data that follows) and the data: renaming rewrites the header alone, and each kept tensor's bytes are
    copied unchanged (tensors of no text module are left out and the rest packed in their order)."""
    with open(source, "rb") as f:
        (length,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(length))
        data_start = 8 + length
        kept = []
        for name, info in header.items():
            new = None if name == "__metadata__" else text_name(name)
            if new is not None:
                kept.append((info["data_offsets"][0], new, info))
        kept.sort(key=lambda entry: entry[0])
        out_header: dict[str, Any] = {"__metadata__": header["__metadata__"]} if "__metadata__" in header else {}
        offset = 0
        for _, new, info in kept:
            begin, end = info["data_offsets"]
            out_header[new] = {**info, "data_offsets": [offset, offset + end - begin]}
            offset += end - begin
        encoded = json.dumps(out_header, separators=(",", ":")).encode()
        encoded += b" " * (-len(encoded) % 8)  # the data starts 8-byte aligned, as safetensors writes it
        digest = hashlib.sha256()
        with open(target, "wb") as out:
            for chunk in (struct.pack("<Q", len(encoded)), encoded):
                out.write(chunk)
                digest.update(chunk)
            for begin, _, info in kept:
                f.seek(data_start + begin)
                remaining = info["data_offsets"][1] - begin
                while remaining:
                    chunk = f.read(min(_CHUNK, remaining))
                    if not chunk:
                        raise NotGemma3(f"{source} ends inside a tensor; re-run the export phase")
                    out.write(chunk)
                    digest.update(chunk)
                    remaining -= len(chunk)
    return os.path.getsize(target), digest.hexdigest()


def text_index(index: dict[str, Any]) -> dict[str, Any]:
    """A sharded export's index, naming the text-only model's weights."""
    weight_map = {text_name(name): shard for name, shard in index["weight_map"].items()}
    weight_map.pop(None, None)
    return {**index, "weight_map": dict(sorted(weight_map.items()))}  # type: ignore[arg-type]


def published(items: list[Item], staging: str) -> list[Item]:
    """The kept files as the repo layout places them (`items`), with the export's config, weights and index as the
    text-only model's; rewritten weights are written under `staging`, which must outlive the upload."""
    by_path = {item.path: item for item in items}
    config_item = by_path.get(CONFIG)
    if config_item is None or isinstance(config_item.source, bytes):
        return items
    with open(config_item.source, encoding="utf-8") as f:
        config = json.load(f)
    if not needs_rewrite(config):
        return items
    rewritten = []
    for item in items:
        if item.path == CONFIG:
            item = Item.of_bytes(CONFIG, (json.dumps(text_config(config), indent=2) + "\n").encode())
        elif item.path == INDEX and isinstance(item.source, str):
            with open(item.source, encoding="utf-8") as f:
                index = text_index(json.load(f))
            item = Item.of_bytes(INDEX, (json.dumps(index, indent=2) + "\n").encode())
        elif "/" not in item.path and item.path.endswith(WEIGHTS_SUFFIX) and isinstance(item.source, str):
            target = os.path.join(staging, item.path)
            size, sha256 = rename_weights(item.source, target)
            item = Item(item.path, target, size, sha256)
        rewritten.append(item)
    return rewritten


def published_manifest(data: bytes, kept: list[Item], published_items: list[Item]) -> bytes:
    """The kept manifest (`data`) as published: each rewritten file listed with its published size and sha256, so a
    copy fetched back checks out, and under `text_only` what keep recorded of it (the export as MaxText wrote it).
    The same kept model always gives the same bytes, which is how a later publish tells it is already there."""
    if published_items == kept:
        return data
    record = json.loads(data)
    now = {item.path: item for item in published_items}
    originals = {}
    for entry in record["files"]:
        item = now.get(destination_path(entry["path"]))
        if item is not None and (item.size, item.sha256) != (entry["size"], entry["sha256"]):
            originals[entry["path"]] = {"size": entry["size"], "sha256": entry["sha256"]}
            entry.update(size=item.size, sha256=item.sha256)
    record["text_only"] = {"why": "published as Gemma3ForCausalLM (workload/publish/text_only.py)", "kept": originals}
    return json.dumps(record, indent=1).encode()
