"""The published model is Gemma 3's language model alone: the export's config becomes its text_config
(`gemma3_text`, Gemma3ForCausalLM) and the weights keep their bytes under the names Gemma3ForCausalLM loads. That
transformers then loads it with no missing or unexpected weight is shown with the real transformers and the tiny
model in tests/workload/publish/test_publish.py."""

from __future__ import annotations

import hashlib
import json

import pytest

from tests import gemma3_export
from workload.publish import text_only
from workload.publish.layout import Item

EXPORT_CONFIG = {
    "architectures": ["Gemma3ForConditionalGeneration"],
    "model_type": "gemma3",
    "dtype": "bfloat16",
    "eos_token_id": [1, 106],
    "transformers_version": "5.8.0",
    "image_token_index": 262144,
    "text_config": {"model_type": "gemma3_text", "hidden_size": 64, "eos_token_id": 1, "tie_word_embeddings": True},
    "vision_config": {"model_type": "siglip_vision_model", "hidden_size": 32},
}


def test_the_config_is_the_text_config_of_a_causal_lm():
    assert text_only.text_config(EXPORT_CONFIG) == {
        "architectures": ["Gemma3ForCausalLM"],
        "dtype": "bfloat16",
        "eos_token_id": [1, 106],
        "hidden_size": 64,
        "model_type": "gemma3_text",
        "tie_word_embeddings": True,
        "transformers_version": "5.8.0",
    }


def test_only_an_image_text_gemma3_config_is_rewritten_and_anything_else_is_one_line():
    assert text_only.needs_rewrite(EXPORT_CONFIG) is True
    assert text_only.needs_rewrite(text_only.text_config(EXPORT_CONFIG)) is False
    with pytest.raises(text_only.NotGemma3) as error:
        text_only.needs_rewrite({"model_type": "llama"})
    assert str(error.value) == (
        "the export's config.json is a 'llama' model without a Gemma 3 text_config; re-run the export phase"
    )


def test_weights_keep_their_bytes_under_the_text_models_names(tmp_path):
    tensors = gemma3_export.export_tensors()
    gemma3_export.write(tmp_path / "model.safetensors", tensors)
    size, sha256 = text_only.rename_weights(str(tmp_path / "model.safetensors"), str(tmp_path / "out.safetensors"))
    written = (tmp_path / "out.safetensors").read_bytes()
    assert (size, sha256) == (len(written), hashlib.sha256(written).hexdigest())
    assert gemma3_export.read(written) == {
        "model.embed_tokens.weight": tensors["model.language_model.embed_tokens.weight"],
        "model.layers.0.mlp.up_proj.weight": tensors["model.language_model.layers.0.mlp.up_proj.weight"],
        "model.norm.weight": tensors["model.language_model.norm.weight"],
    }


def test_transformers_legacy_names_are_renamed_too():
    assert text_only.text_name("language_model.model.layers.3.self_attn.q_proj.weight") == (
        "model.layers.3.self_attn.q_proj.weight"
    )
    assert text_only.text_name("language_model.lm_head.weight") == "lm_head.weight"
    assert text_only.text_name("vision_tower.encoder.layers.0.mlp.fc1.bias") is None
    assert text_only.text_name("multi_modal_projector.mm_input_projection_weight") is None


def test_a_sharded_exports_index_names_the_new_weights():
    index = {
        "metadata": {"total_size": 3},
        "weight_map": {
            "model.language_model.norm.weight": "model-00002-of-00002.safetensors",
            "model.vision_tower.vision_model.post_layernorm.weight": "model-00001-of-00002.safetensors",
        },
    }
    assert text_only.text_index(index) == {
        "metadata": {"total_size": 3},
        "weight_map": {"model.norm.weight": "model-00002-of-00002.safetensors"},
    }


def test_published_rewrites_the_export_and_passes_the_rest_through(tmp_path):
    gemma3_export.write(tmp_path / "model.safetensors", gemma3_export.export_tensors(1000))
    (tmp_path / "config.json").write_text(json.dumps(EXPORT_CONFIG))
    (tmp_path / "tokenizer.json").write_text("{}")
    items = [Item(name, str(tmp_path / name), 1, "0" * 64) for name in ("config.json", "model.safetensors")]
    items += [Item("tokenizer.json", str(tmp_path / "tokenizer.json"), 2, "1" * 64), Item.of_bytes("tpu-sft/x", b"x")]
    staging = tmp_path / "staging"
    staging.mkdir()
    config, weights, tokenizer, other = text_only.published(items, str(staging))
    assert json.loads(config.source)["architectures"] == ["Gemma3ForCausalLM"]  # type: ignore[arg-type]
    assert weights.source == str(staging / "model.safetensors") and "model.norm.weight" in gemma3_export.read(
        staging / "model.safetensors"
    )
    assert (tokenizer, other) == (items[2], items[3])
    (tmp_path / "config.json").write_text(json.dumps(text_only.text_config(EXPORT_CONFIG)))
    assert text_only.published(items, str(staging)) == items  # already text-only: unchanged


def test_the_published_manifest_lists_rewritten_files_as_published_and_keeps_keeps_record(tmp_path):
    kept = [Item("config.json", "c", 10, "a" * 64), Item("tpu-sft/loss.png", "l", 5, "b" * 64)]
    record = {
        "run_name": "r",
        "files": [
            {"path": "hf-model/config.json", "size": 10, "sha256": "a" * 64},
            {"path": "loss.png", "size": 5, "sha256": "b" * 64},
        ],
    }
    data = json.dumps(record).encode()
    assert text_only.published_manifest(data, kept, kept) == data  # nothing rewritten: the kept manifest itself
    config = Item.of_bytes("config.json", b"{}")
    published = json.loads(text_only.published_manifest(data, kept, [config, kept[1]]))
    assert published["files"] == [
        {"path": "hf-model/config.json", "size": 2, "sha256": config.sha256},
        {"path": "loss.png", "size": 5, "sha256": "b" * 64},
    ]
    assert published["text_only"]["kept"] == {"hf-model/config.json": {"size": 10, "sha256": "a" * 64}}
    assert text_only.published_manifest(data, kept, [config, kept[1]]) == text_only.published_manifest(
        data, kept, [config, kept[1]]
    )  # the same model, the same bytes: a later publish finds it there
