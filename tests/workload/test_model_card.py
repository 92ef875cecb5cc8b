"""The model card: written from what the kept manifest and samples.md record, "not recorded" for the rest, with
the Hub's metadata and the Gemma Terms of Use's notice."""

from __future__ import annotations

import yaml

from workload.publish.model_card import NOTICE, PROHIBITED_USE, TERMS, card

SETTINGS = {
    "maxtextVersion": "0.2.2",
    "model": "gemma3-4b",
    "profile": "full",
    "steps": 1000,
    "dataset": "HuggingFaceH4/ultrachat_200k",
    "trainSplit": "train_sft",
    "trainDataColumns": ["messages"],
    "learningRate": 2e-05,
    "acceleratorType": "v6e-8",
}
TRAIN = {
    "final_step": 1000,
    "final_loss": 1.2345678,
    "chip_hours": 2.5,
    "eval_loss_first": 1.9,
    "eval_loss_first_step": 0,
    "eval_loss_final": 1.4,
    "eval_loss_final_step": 1000,
    "eval_loss_change": -0.2632,
}
SAMPLES = """# Before and after the fine-tune

Greedy, at most 48 new tokens. The first 3 prompts are held-out questions (never trained on).

| prompt | base model | fine-tuned |
|---|---|---|
| q1 | b1 | t1 |
| q2 | b2 | t2 |
| q3 | b3 | t3 |
| q4 | b4 | t4 |
| q5 | b5 | t5 |
"""


def manifest(**changes) -> dict:
    steps = {
        "train": {"inputs": "0" * 64, "facts": TRAIN},
        "verify": {"inputs": "1" * 64, "facts": {"verify": {"ok": True}}},
    }
    files = [{"path": p, "size": 1, "sha256": "0" * 64} for p in ("loss.png", "samples.md", "hf-model/config.json")]
    return {"run_name": "gemma3-4b-sft-0123456789ab", "settings": SETTINGS, "steps": steps, "files": files, **changes}


def front_matter(text: str) -> dict:
    assert text.startswith("---\n")
    return yaml.safe_load(text.split("---\n")[1])


def test_the_card_carries_the_hubs_metadata_and_the_gemma_terms(tmp_path):
    (tmp_path / "samples.md").write_text(SAMPLES)
    text = card(manifest(), str(tmp_path), "team/gemma-sft")
    assert front_matter(text) == {
        "license": "gemma",
        "license_link": TERMS,
        "library_name": "transformers",
        "pipeline_tag": "text-generation",
        "base_model": "google/gemma-3-4b-it",
        "base_model_relation": "finetune",
        "datasets": ["HuggingFaceH4/ultrachat_200k"],
        "tags": ["tpu-sft", "maxtext", "gemma3"],
    }
    assert f"> {NOTICE}" in text and f"]({TERMS})" in text and f"]({PROHIBITED_USE})" in text
    assert 'AutoModelForCausalLM.from_pretrained("team/gemma-sft")' in text


def test_the_card_quotes_the_runs_settings_losses_and_first_samples(tmp_path):
    (tmp_path / "samples.md").write_text(SAMPLES)
    text = card(manifest(), str(tmp_path), "team/gemma-sft")
    assert "# gemma3-4b-sft-0123456789ab" in text
    assert "| `learningRate` | `2e-05` |" in text and '| `trainDataColumns` | `["messages"]` |' in text
    assert "final training loss: 1.2346" in text and "chip-hours: 2.5" in text
    assert "| before (the base model) | 0 | 1.9000 |" in text and "| after | 1000 | 1.4000 |" in text
    assert "Change: -26.3%." in text and "![training and held-out loss](tpu-sft/loss.png)" in text
    assert "| q4 | b4 | t4 |" in text and "q5" not in text and "All 5 prompts" in text
    assert "The first 3 prompts are held-out questions" in text
    assert "MaxText 0.2.2" in text and "on v6e-8" in text and "Verification (" in text and "): passed." in text


def test_what_the_run_did_not_record_is_said_so_never_guessed(tmp_path):
    older = {"run_name": "my-run", "steps": {}, "files": [{"path": "hf-model/config.json", "size": 1}]}
    text = card(older, str(tmp_path), "team/gemma-sft")
    metadata = front_matter(text)
    assert "base_model" not in metadata and "datasets" not in metadata and metadata["license"] == "gemma"
    for said in (
        "a base model not recorded",
        "Settings: not recorded.",
        "Training figures: not recorded.",
        "Held-out loss: not recorded",
        "Samples: not recorded.",
        "MaxText not recorded",
        "): not recorded.",
    ):
        assert said in text


def test_a_tiny_profile_card_names_no_google_base_model_or_dataset(tmp_path):
    text = card(manifest(settings={**SETTINGS, "profile": "tiny"}, files=[]), str(tmp_path), "team/tiny")
    metadata = front_matter(text)
    assert "base_model" not in metadata and "datasets" not in metadata
    assert "tiny profile" in text and "google/gemma-3-4b-it" not in text


def test_a_card_in_cloud_storage_says_to_copy_the_model_first(tmp_path):
    text = card(manifest(files=[]), str(tmp_path), "gs://models/team/gemma-sft")
    assert "gcloud storage cp -r gs://models/team/gemma-sft ./model" in text
    assert 'AutoModelForCausalLM.from_pretrained("./model")' in text and "HF_TOKEN" not in text
