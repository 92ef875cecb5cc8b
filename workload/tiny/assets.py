"""The tiny profile's assets, built locally with no hub access: a random 6-layer Gemma 3 in Hugging Face
format (with the real Gemma 3 tokenizer that ships inside the maxtext wheel, cut to 8,192 pieces, and a Gemma 3
chat template) and a small UltraChat-shaped dataset laid out like the Hub copy
(`data/train_sft-00000-of-00001.parquet`, and the held-out `data/test_sft-00000-of-00001.parquet` that training
evaluates on; columns `prompt`, `prompt_id`, `messages`), so `train_sft` reads it with the seed's own data keys.

Runs inside the MaxText venv (needs transformers, torch, pyarrow): `python -m workload.tiny.assets DIR`.
Deterministic: the same SPEC and seed give the same weights, so the tiny spec is the convert fingerprint.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import os
import sys

# MaxText takes these as overrides of gemma3-4b; the HF config below is derived from the same numbers.
SPEC = {
    "num_layers": 6,
    "emb_dim": 64,
    "num_query_heads": 4,
    "num_kv_heads": 2,
    "head_dim": 16,
    "mlp_dim": 128,
    # Gemma 3's tokenizer cut to 8,192 pieces (build_tokenizer). With all 262,144, the embedding was 99 % of the tiny
    # model's 17.0 M weights (now 0.75 M), and every step, save, conversion and logit comparison paid for it.
    "vocab_size": 8192,
    "sliding_window": 32,
    "seed": 0,
    "conversations": 48,
    "held_out": 8,  # conversations after the training ones: the same topics, never trained on
}

MODEL_SUBDIR = "model"
DATASET_SUBDIR = "ultrachat"
DATASET_FILE = "data/train_sft-00000-of-00001.parquet"
HELD_OUT_FILE = "data/test_sft-00000-of-00001.parquet"

# Gemma 3's chat template for text-only conversations (the Hub tokenizer's template without image parts).
CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}"
    "{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}"
    "{%- set first_user_prefix = '' -%}"
    "{%- set loop_messages = messages -%}"
    "{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{%- endif -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') }}"
    "{{ message['content'] | trim }}"
    "{{ '<end_of_turn>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}"
)

_CHARACTERS = 512  # of the tokenizer's pieces: Gemma's most frequent single characters

_TOPICS = ("rivers", "bread", "comets", "violins", "glaciers", "bees", "bridges", "tides")


def maxtext_overrides() -> list[str]:
    """The MaxText config overrides that shrink gemma3-4b to the tiny model."""
    s = SPEC
    return [
        "override_model_config=True",
        f"base_num_decoder_layers={s['num_layers']}",
        f"base_emb_dim={s['emb_dim']}",
        f"base_num_query_heads={s['num_query_heads']}",
        f"base_num_kv_heads={s['num_kv_heads']}",
        f"head_dim={s['head_dim']}",
        f"base_mlp_dim={s['mlp_dim']}",
        f"vocab_size={s['vocab_size']}",
        f"sliding_window_size={s['sliding_window']}",
    ]


def _maxtext_file(*parts: str) -> str:
    """A file of the installed MaxText, found without importing the package: its __init__ imports all of MaxText
    (~20 s of CPU), and the tiny assets need two of its plain files."""
    spec = importlib.util.find_spec("maxtext")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("maxtext is not installed in this Python: the tiny profile runs in MaxText's venv")
    return os.path.join(spec.submodule_search_locations[0], *parts)


def _hf_model_configs() -> dict:
    """MaxText's `HF_MODEL_CONFIGS`, loaded from its module's file (which imports only transformers)."""
    path = _maxtext_file("checkpoint_conversion", "utils", "hf_model_configs.py")
    spec = importlib.util.spec_from_file_location("maxtext_hf_model_configs", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.HF_MODEL_CONFIGS


def hf_config(hidden_activation: str | None = None):
    """The tiny model's transformers config: MaxText's own gemma3-4b config, with the text sizes of SPEC
    and a minimal vision tower (the converters skip it with use_multimodal=False, but the class needs
    one). `hidden_activation` None keeps MaxText's value, as the export will write it (maxtext#2867)."""
    from transformers import Gemma3Config

    base = _hf_model_configs()["gemma3-4b"].to_dict()
    s = SPEC
    text = dict(base["text_config"])
    text.update(
        hidden_size=s["emb_dim"],
        intermediate_size=s["mlp_dim"],
        num_hidden_layers=s["num_layers"],
        num_attention_heads=s["num_query_heads"],
        num_key_value_heads=s["num_kv_heads"],
        head_dim=s["head_dim"],
        query_pre_attn_scalar=s["head_dim"],
        sliding_window=s["sliding_window"],
        vocab_size=s["vocab_size"],
    )
    if hidden_activation:
        text["hidden_activation"] = hidden_activation
    text.pop("layer_types", None)  # recomputed from num_hidden_layers and the sliding-window pattern
    vision = dict(base["vision_config"])
    vision.update(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=28)
    fields = {k: v for k, v in base.items() if k not in ("text_config", "vision_config")}
    fields.update(text_config=text, vision_config=vision, mm_tokens_per_image=4)
    return Gemma3Config(**fields)


def gemma_tokenizer_file() -> str:
    """Gemma 3's SentencePiece model as the maxtext wheel ships it: what the tiny tokenizer is cut from."""
    return _maxtext_file("assets", "tokenizers", "tokenizer.gemma3")


def build_tokenizer(out_dir: str):
    """Gemma 3's own SentencePiece model cut to `vocab_size` pieces: its first ones, with their ids (the control
    tokens, the chat turns' marks and newlines, the 256 bytes it falls back to and its most frequent merges), then
    its `_CHARACTERS` most frequent characters, which Gemma lists last and its merges are made of. English reads in
    about a third more pieces than with the whole vocabulary (tests/workload/tiny/test_tokenizer.py); what is outside
    them still encodes, in bytes, as Gemma's does with what it has never seen."""
    from sentencepiece import sentencepiece_model_pb2
    from transformers import GemmaTokenizer

    os.makedirs(out_dir, exist_ok=True)
    model = sentencepiece_model_pb2.ModelProto()
    with open(gemma_tokenizer_file(), "rb") as f:
        model.ParseFromString(f.read())
    normal = sentencepiece_model_pb2.ModelProto.SentencePiece.NORMAL
    characters = [p for p in model.pieces if p.type == normal and len(p.piece) == 1][:_CHARACTERS]
    kept = [*model.pieces[: SPEC["vocab_size"] - len(characters)], *characters]
    del model.pieces[:]
    model.pieces.extend(kept)
    model.trainer_spec.vocab_size = len(kept)
    with open(os.path.join(out_dir, "tokenizer.model"), "wb") as f:
        f.write(model.SerializeToString())
    tokenizer = GemmaTokenizer.from_pretrained(out_dir)
    tokenizer.chat_template = CHAT_TEMPLATE
    tokenizer.save_pretrained(out_dir)
    return tokenizer


def build_model(out_dir: str) -> None:
    import torch
    from transformers import Gemma3ForConditionalGeneration

    torch.manual_seed(SPEC["seed"])
    # bf16, like the real checkpoint: the export is bf16, so a round trip can be compared bit for bit.
    # The Hub's gemma-3 configs say gelu_pytorch_tanh; MaxText's copy says gelu (maxtext#2867).
    model = Gemma3ForConditionalGeneration(hf_config("gelu_pytorch_tanh")).to(torch.bfloat16)
    model.config.dtype = "bfloat16"
    model.save_pretrained(out_dir)


def conversations(count: int, first: int = 0) -> list[dict]:
    """UltraChat-shaped rows: a prompt, its sha256 as prompt_id, and alternating user/assistant turns."""
    rows = []
    for i in range(first, first + count):
        topic = _TOPICS[i % len(_TOPICS)]
        prompt = f"Tell me something about {topic}, number {i}."
        messages = [{"content": prompt, "role": "user"}]
        for turn in range(1 + i % 3):
            messages.append(
                {
                    "content": f"Here is fact {turn} about {topic}: they are studied by curious people in many places. "
                    * (1 + i % 4),
                    "role": "assistant",
                }
            )
            messages.append({"content": f"Thanks. And what about {topic} in winter?", "role": "user"})
        messages.append({"content": f"In winter {topic} change in interesting ways.", "role": "assistant"})
        rows.append({"prompt": prompt, "prompt_id": hashlib.sha256(prompt.encode()).hexdigest(), "messages": messages})
    return rows


def build_dataset(out_dir: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    trained, held_out = SPEC["conversations"], SPEC["held_out"]
    for name, rows in ((DATASET_FILE, conversations(trained)), (HELD_OUT_FILE, conversations(held_out, trained))):
        path = os.path.join(out_dir, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        pq.write_table(pa.Table.from_pylist(rows), path)


def build(out_dir: str) -> None:
    model_dir = os.path.join(out_dir, MODEL_SUBDIR)
    build_tokenizer(model_dir)
    build_model(model_dir)
    build_dataset(os.path.join(out_dir, DATASET_SUBDIR))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workload.tiny.assets", description=__doc__.split("\n\n")[0])
    parser.add_argument("dir", help="where to write model/ and ultrachat/ (created)")
    build(parser.parse_args(argv).dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
