"""A small Gemma 3 export as MaxText's to_huggingface writes one, for tests: its config (image-text, vision_config
kept) and safetensors files, written and read with the standard library (the format: an 8-byte
little-endian header length, a JSON header of each tensor's dtype, shape and byte offsets, then the data)."""

from __future__ import annotations

import json
import os
import struct
from pathlib import Path

EXPORT_CONFIG = {
    "architectures": ["Gemma3ForConditionalGeneration"],
    "model_type": "gemma3",
    "text_config": {"model_type": "gemma3_text", "hidden_size": 64},
    "vision_config": {"model_type": "siglip_vision_model"},
}


def write(path: Path, tensors: dict[str, bytes]) -> None:
    """Each tensor a flat U8 array of its bytes, in the order given."""
    header: dict = {"__metadata__": {"format": "pt"}}
    offset = 0
    for name, data in tensors.items():
        header[name] = {"dtype": "U8", "shape": [len(data)], "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    encoded = json.dumps(header).encode()
    encoded += b" " * (-len(encoded) % 8)
    path.write_bytes(struct.pack("<Q", len(encoded)) + encoded + b"".join(tensors.values()))


def read(path: Path | bytes) -> dict[str, bytes]:
    """Each tensor's bytes by name."""
    data = path if isinstance(path, bytes) else path.read_bytes()
    (length,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + length])
    start = 8 + length
    return {
        name: data[start + info["data_offsets"][0] : start + info["data_offsets"][1]]
        for name, info in header.items()
        if name != "__metadata__"
    }


def export_tensors(size: int = 100_000) -> dict[str, bytes]:
    """A Gemma 3 export's weights as MaxText's to_huggingface names them (random bytes), and one vision weight."""
    return {
        "model.language_model.embed_tokens.weight": os.urandom(size),
        "model.language_model.layers.0.mlp.up_proj.weight": os.urandom(size),
        "model.vision_tower.vision_model.post_layernorm.weight": os.urandom(64),
        "model.language_model.norm.weight": os.urandom(size),
    }
