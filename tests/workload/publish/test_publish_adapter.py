"""A LoRA run publishes its adapter and/or its merged model (`python -m workload.publish --hub-adapter` and/or
`--hub`), each to a repo of its own with a card that says which it is and where the other went, if it went; the
adapter alone writes no text-only model; a run that kept no adapter is refused before anything is sent. Against the
Hub stand-in (tests/hub_upload_standin.py, conftest.py), through the MaxText venv's huggingface_hub as on the VM."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from tests import gemma3_export
from tests.hub_upload_standin import HubStandin
from tests.workload.eval.reports import write_report
from tests.workload.publish.test_publish import WRITE_TOKEN, write_manifest

REPO = Path(__file__).resolve().parents[3]
LORA = {"model": "gemma3-4b", "profile": "full", "tuning": "lora", "trainer": "tunix", "loraRank": 16}
ADAPTER_FILES = ("adapter_config.json", "adapter_model.safetensors")
MODEL, ADAPTER = "team/gemma-sft", "team/gemma-sft-lora"


def kept_run(root: Path, *, lora: bool, merged: bool = True) -> Path:
    """A kept model as `keep` leaves a run: the merged export (unless `merged` is false), and for a LoRA run its
    adapter as a PEFT repo."""
    model = root / "gemma3-4b-sft-0123456789ab"
    model.mkdir()
    if merged:
        (model / "hf-model").mkdir()
        (model / "hf-model" / "config.json").write_text(json.dumps(gemma3_export.EXPORT_CONFIG))
        gemma3_export.write(model / "hf-model" / "model.safetensors", gemma3_export.export_tensors())
    if lora:
        (model / "hf-adapter").mkdir()
        config = {"peft_type": "LORA", "r": 16, "lora_alpha": 32, "base_model_name_or_path": "google/gemma-3-4b-it"}
        (model / "hf-adapter" / "adapter_config.json").write_text(json.dumps(config))
        (model / "hf-adapter" / "adapter_model.safetensors").write_bytes(os.urandom(3_000))
    write_manifest(model, LORA if lora else None)
    write_report(model)  # one the gate passes
    return model


def publish(maxtext_python: str, hub: HubStandin, model: Path, token_file: Path, staging: Path, *where: str):
    env = {**os.environ, "HF_ENDPOINT": hub.endpoint, "PYTHONPATH": str(REPO), "HF_HUB_DISABLE_TELEMETRY": "1"}
    env.pop("HF_TOKEN", None)
    argv = [maxtext_python, "-m", "workload.publish", str(model), *where]
    argv += ["--hf-token-file", str(token_file), "--staging-dir", str(staging)]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=180)
    assert WRITE_TOKEN not in " ".join(argv) + done.stdout + done.stderr  # never in argv, output or logs
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1])


def test_the_adapter_alone_goes_to_its_repo_with_a_card_that_says_the_merged_model_did_not(
    maxtext_python, hub, token_file, tmp_path
):
    # No merged export: the adapter alone reads none of it, so none is laid out as a text-only model.
    model = kept_run(tmp_path, lora=True, merged=False)
    code, summary = publish(maxtext_python, hub, model, token_file, tmp_path / "staging", "--hub-adapter", ADAPTER)
    assert code == 0, summary
    assert set(summary["published"]) == {f"hf://{ADAPTER}"}
    assert set(hub.repos) == {ADAPTER} and hub.repos[ADAPTER]["private"] is True
    assert set(hub.repos[ADAPTER]["files"]) == {*ADAPTER_FILES, "README.md", "tpu-sft/manifest.json"}
    for name in ADAPTER_FILES:
        assert hub.content(ADAPTER, name) == (model / "hf-adapter" / name).read_bytes()
    card = hub.content(ADAPTER, "README.md").decode()
    assert "This is the LoRA adapter (PEFT), not a whole model" in card
    assert "its merge into the base was not published to the Hub with it" in card
    assert "library_name: peft" in card


def test_both_go_each_to_its_repo_and_each_card_names_the_other(maxtext_python, hub, token_file, tmp_path):
    model = kept_run(tmp_path, lora=True)
    where = ("--hub", MODEL, "--hub-adapter", ADAPTER)
    code, summary = publish(maxtext_python, hub, model, token_file, tmp_path / "staging", *where)
    assert code == 0, summary
    assert set(summary["published"]) == {f"hf://{MODEL}", f"hf://{ADAPTER}"}
    assert {"config.json", "model.safetensors", "tpu-sft/hf-adapter/adapter_config.json"} <= set(
        hub.repos[MODEL]["files"]
    )
    merged_card = hub.content(MODEL, "README.md").decode()
    assert "merged into the base by peft's `merge_and_unload`: a whole model" in merged_card
    assert f"It is also published alone, at the root of [{ADAPTER}](https://huggingface.co/{ADAPTER})" in merged_card
    adapter_card = hub.content(ADAPTER, "README.md").decode()
    assert f"its merge into the base, a model of its own, is [{MODEL}](https://huggingface.co/{MODEL})" in adapter_card


def test_a_run_that_kept_no_adapter_is_refused_before_anything_is_sent(maxtext_python, hub, token_file, tmp_path):
    model = kept_run(tmp_path, lora=False)
    where = ("--hub", MODEL, "--hub-adapter", ADAPTER)
    code, summary = publish(maxtext_python, hub, model, token_file, tmp_path / "staging", *where)
    assert code == 2
    assert summary["error"] == f"{model} keeps no hf-adapter/: --hub-adapter is for a run with tpu-sft:tuning lora"
    assert hub.repos == {} and hub.commits == []
