"""The model card: written from what the kept manifest and samples.md record, "not recorded" for the rest, with
the Hub's metadata (Hub dataset ids only in `datasets:`; a dataset of files described by name, rows and sha256,
never by its bucket path), the model said to be text-only, and the Gemma Terms of Use's notice.

The metadata and the Markdown are checked here in the project's venv; the whole card, rendered by the pinned
huggingface_hub's ModelCardData and ModelCard in the MaxText venv, by the last tests (and, refused or accepted by
the Hub stand-in through huggingface_hub's own create_commit, in tests/workload/publish/test_publish.py)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.workload.eval.reports import comparisons, write_report
from workload.core.models import GEMMA_TERMS
from workload.publish.model_card import TEXT_ONLY, body, metadata

REPO = Path(__file__).resolve().parents[3]
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
BUCKET_DATA = "gs://acme-private-stack-bucket/data/5f0c1e/chats.jsonl"  # where `pulumi up` copies a local file
DATA = {"files": [{"name": "chats.jsonl", "rows": 1234, "sha256": "ab" * 32, "bytes": 56789}]}


@pytest.fixture(autouse=True)
def samples(tmp_path) -> None:
    """The kept samples.md, which the manifests below list."""
    (tmp_path / "samples.md").write_text(SAMPLES)


def manifest(**changes) -> dict:
    steps = {
        "train": {"inputs": "0" * 64, "facts": TRAIN},
        "verify": {"inputs": "1" * 64, "facts": {"verify": {"ok": True}}},
    }
    files = [{"path": p, "size": 1, "sha256": "0" * 64} for p in ("loss.png", "samples.md", "hf-model/config.json")]
    return {"run_name": "gemma3-4b-sft-0123456789ab", "settings": SETTINGS, "steps": steps, "files": files, **changes}


def given(fields: dict) -> dict:
    """The metadata fields that are set (ModelCardData leaves out None)."""
    return {key: value for key, value in fields.items() if value is not None}


def test_the_card_carries_the_hubs_metadata_and_the_gemma_terms(tmp_path):
    assert given(metadata(manifest())) == {
        "license": "gemma",
        "license_link": GEMMA_TERMS.terms,
        "library_name": "transformers",
        "pipeline_tag": "text-generation",
        "base_model": "google/gemma-3-4b-it",
        "base_model_relation": "finetune",
        "datasets": ["HuggingFaceH4/ultrachat_200k"],
        "tags": ["tpu-sft", "maxtext", "gemma3", "text-only"],
    }
    text = body(manifest(), str(tmp_path), "team/gemma-sft")
    assert f"> {GEMMA_TERMS.notice}" in text and f"]({GEMMA_TERMS.terms})" in text
    assert f"]({GEMMA_TERMS.prohibited_use})" in text
    assert 'AutoModelForCausalLM.from_pretrained("team/gemma-sft")' in text
    assert "(https://huggingface.co/datasets/HuggingFaceH4/ultrachat_200k) (split `train_sft`)." in text


def test_the_card_says_the_model_is_text_only(tmp_path):
    for settings in (SETTINGS, {**SETTINGS, "profile": "tiny"}):
        text = body(manifest(settings=settings), str(tmp_path), "team/gemma-sft")
        assert TEXT_ONLY in text and "Gemma3ForCausalLM" in text and "takes no images" in text


def test_a_dataset_of_files_is_described_by_name_rows_and_checksum_never_by_its_bucket(tmp_path):
    settings = {**SETTINGS, "dataset": BUCKET_DATA, "chatTemplate": "gs://acme-private-stack-bucket/data/9/t.jinja"}
    fields = given(metadata(manifest(settings=settings, data=DATA)))
    assert "datasets" not in fields and fields["base_model"] == "google/gemma-3-4b-it"
    text = body(manifest(settings=settings, data=DATA), str(tmp_path), "team/gemma-sft")
    assert "acme-private-stack-bucket" not in text and "gs://" not in text and "huggingface.co/datasets" not in text
    assert f"| `chats.jsonl` | 1234 | `{'ab' * 32}` |" in text
    assert "| `dataset` | `chats.jsonl` |" in text and "| `chatTemplate` | `t.jinja` |" in text
    assert "own data (the files under Data below)" in text


def test_a_local_dataset_and_a_dataset_of_many_files(tmp_path):
    many = {"files": [{"name": f"part-{n}.jsonl", "rows": 10, "sha256": f"{n:064x}", "bytes": 1} for n in range(25)]}
    settings = {**SETTINGS, "dataset": "/home/me/secret-project/part-*.jsonl"}
    assert "datasets" not in given(metadata(manifest(settings=settings)))
    text = body(manifest(settings=settings, data=many), str(tmp_path), "team/gemma-sft")
    assert "secret-project" not in text and "| `dataset` | `part-*.jsonl` |" in text
    assert "| `part-19.jsonl` | 10 |" in text and "part-20.jsonl" not in text and "| 5 more | | |" in text
    assert "25 files, 250 rows in all." in text


def test_what_the_run_did_not_record_is_said_so_never_guessed(tmp_path):
    older = {"run_name": "my-run", "steps": {}, "files": [{"path": "hf-model/config.json", "size": 1}]}
    fields = given(metadata(older))
    assert "base_model" not in fields and "datasets" not in fields and fields["license"] == "gemma"
    text = body(older, str(tmp_path), "team/gemma-sft")
    for said in (
        "a base model not recorded",
        "a dataset not recorded",
        "Data: not recorded.",
        "Settings: not recorded.",
        "Training figures: not recorded.",
        "Held-out loss: not recorded",
        "Samples: not recorded.",
        "MaxText not recorded",
        "): not recorded.",
    ):
        assert said in text
    unreadable = {"error": "PermissionError: 403 storage.objects.get denied"}
    text = body(manifest(settings={**SETTINGS, "dataset": BUCKET_DATA}, data=unreadable), str(tmp_path), "t/x")
    assert "were not recorded (PermissionError: 403 storage.objects.get denied)." in text
    text = body(manifest(settings={**SETTINGS, "dataset": BUCKET_DATA}), str(tmp_path), "t/x")
    assert "Files, whose names, rows and sha256 were not recorded." in text and "gs://" not in text


def test_the_card_quotes_the_runs_settings_losses_and_first_samples(tmp_path):
    text = body(manifest(), str(tmp_path), "team/gemma-sft")
    assert "# gemma3-4b-sft-0123456789ab" in text
    assert "| `learningRate` | `2e-05` |" in text and '| `trainDataColumns` | `["messages"]` |' in text
    assert "| `dataset` | `HuggingFaceH4/ultrachat_200k` |" in text
    assert "final training loss: 1.2346" in text and "chip-hours: 2.5" in text
    assert "| before (the base model) | 0 | 1.9000 |" in text and "| after | 1000 | 1.4000 |" in text
    assert "Change: -26.3%." in text and "![training and held-out loss](tpu-sft/loss.png)" in text
    assert "| q4 | b4 | t4 |" in text and "q5" not in text and "All 5 prompts" in text
    assert "The first 3 prompts are held-out questions" in text
    assert "MaxText 0.2.2" in text and "on v6e-8" in text and "Verification (" in text and "): passed." in text
    assert "fine-tuned it with `train_sft` on" in text  # a run recorded before tpu-sft:trainer: the seed's loop
    native = body(manifest(settings={**SETTINGS, "trainer": "native"}), str(tmp_path), "team/gemma-sft")
    assert "fine-tuned it with `train_sft_native` on" in native


def test_a_tiny_profile_card_names_no_google_base_model_or_dataset(tmp_path):
    tiny = manifest(settings={**SETTINGS, "profile": "tiny"}, files=[])
    fields = given(metadata(tiny))
    assert "base_model" not in fields and "datasets" not in fields
    text = body(tiny, str(tmp_path), "team/tiny")
    assert "tiny profile" in text and "google/gemma-3-4b-it" not in text


def test_a_card_in_cloud_storage_says_to_copy_the_model_first(tmp_path):
    text = body(manifest(files=[]), str(tmp_path), "gs://models/team/gemma-sft")
    assert "gcloud storage cp -r gs://models/team/gemma-sft ./model" in text
    assert 'AutoModelForCausalLM.from_pretrained("./model")' in text and "HF_TOKEN" not in text


RENDER = """
import json, sys
from workload.publish.model_card import card
print(card(json.loads(sys.argv[1]), sys.argv[2], "team/gemma-sft"), end="")
"""


def render(maxtext_python: str, record: dict, model_dir: Path) -> str:
    argv = [maxtext_python, "-c", RENDER, json.dumps(record), str(model_dir)]
    done = subprocess.run(argv, capture_output=True, text=True, env={"PYTHONPATH": str(REPO)}, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_the_pinned_huggingface_hub_renders_the_metadata_and_the_markdown_whole(maxtext_python, tmp_path):
    for record in (manifest(), manifest(settings={**SETTINGS, "dataset": BUCKET_DATA}, data=DATA)):
        text = render(maxtext_python, record, tmp_path)
        head, _, rest = text.removeprefix("---\n").partition("\n---\n")
        assert text.startswith("---\n") and yaml.safe_load(head) == given(metadata(record))
        assert rest.strip() == body(record, str(tmp_path), "team/gemma-sft").strip()


def test_a_lora_runs_card_says_the_model_is_the_merge_and_where_its_adapter_is(tmp_path):
    lora = {**SETTINGS, "tuning": "lora", "trainer": "tunix", "loraRank": 16}
    text = body(manifest(settings=lora), str(tmp_path), "team/gemma-sft")
    assert "## The LoRA adapter" in text and "merged into the base by peft's `merge_and_unload`" in text
    assert "is in `tpu-sft/hf-adapter`" in text
    assert "It was not published to a repo of its own." in text  # no tpu-sft:publishHubAdapterRepo
    own = body(manifest(settings=lora), str(tmp_path), "team/gemma-sft", "team/gemma-sft-lora")
    assert (
        "It is also published alone, at the root of [team/gemma-sft-lora](https://huggingface.co/team/gemma-sft-lora)"
        in own
    )
    assert 'AutoPeftModelForCausalLM.from_pretrained("team/gemma-sft-lora")' in own and "not published" not in own
    assert "## The LoRA adapter" not in body(manifest(), str(tmp_path), "team/gemma-sft")  # a full run has none
    assert "quantised" not in text


def test_a_qlora_runs_card_says_its_base_was_quantised_while_training_and_the_merge_is_not(tmp_path):
    qlora = {**SETTINGS, "tuning": "qlora", "trainer": "tunix"}
    text = body(manifest(settings=qlora), str(tmp_path), "team/gemma-sft")
    assert "## The LoRA adapter" in text and "is in `tpu-sft/hf-adapter`" in text
    assert "quantised to nf4 while training (QLoRA), merged into the unquantised base" in text


def test_the_eval_scores_are_the_hubs_model_index_with_the_base_beside_the_fine_tune():
    gsm8k = comparisons()[1]  # GSM8K 0.71 → 0.69
    assert metadata(manifest(), (gsm8k,), "team/gemma-sft")["model-index"] == [
        {
            "name": "team/gemma-sft",
            "results": [
                {
                    "task": {"type": "text-generation"},
                    "dataset": {
                        "type": "openai/gsm8k",
                        "name": "GSM8K (1000 of 1319)",
                        "config": "main",
                        "split": "test",
                    },
                    "metrics": [
                        {"type": "exact_match", "value": 0.69, "name": "GSM8K, this fine-tune"},
                        {"type": "exact_match", "value": 0.71, "name": "GSM8K, base model google/gemma-3-4b-it"},
                    ],
                }
            ],
        }
    ]
    assert "model-index" not in metadata(manifest())  # no eval report: no results claimed


def test_the_card_shows_both_scores_the_change_its_interval_and_the_gate(tmp_path):
    write_report(tmp_path)
    text = body(manifest(), str(tmp_path), "team/gemma-sft", gate_line="passed: no benchmark worse")
    ifeval, gsm8k = comparisons()
    assert "## Benchmarks, before and after" in text
    assert (
        f"| IFEval strict | 541 | 0.7800 | 0.8004 | +2.0 | {ifeval.low * 100:+.1f} to {ifeval.high * 100:+.1f} |"
        in text
    )
    assert f"| GSM8K | 1000 | 0.7100 | 0.6900 | -2.0 | {gsm8k.low * 100:+.1f} to {gsm8k.high * 100:+.1f} |" in text
    assert "The publish gate: passed: no benchmark worse." in text
    assert str(tmp_path) not in text  # where the report is kept is not published
    for off_or_missing in ('{"off": true}', None):  # the eval step's record of evalTasks off; no report at all
        report = tmp_path / "eval" / "report.json"
        if off_or_missing:
            report.write_text(off_or_missing)
        else:
            report.unlink()
        assert "Benchmark scores: not recorded (the eval was off, or its report is missing)." in body(
            manifest(), str(tmp_path), "team/gemma-sft"
        )


def test_the_pinned_huggingface_hub_renders_the_model_index_whole(maxtext_python, tmp_path):
    write_report(tmp_path)
    text = render(maxtext_python, manifest(), tmp_path)
    head = yaml.safe_load(text.removeprefix("---\n").partition("\n---\n")[0])
    assert head["model-index"] == metadata(manifest(), comparisons(), "team/gemma-sft")["model-index"]
