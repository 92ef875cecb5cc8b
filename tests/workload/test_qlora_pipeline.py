"""A QLoRA run (`tuning: qlora`, int8 here; the rehearsal runs nf4) on real MaxText 0.2.3 (CPU, tiny Gemma 3), over two
devices: Tunix's loop trains the adapter on frozen weights qwix quantised (workload/launch/quantised_base.py) and its
held-out loss falls; the trainer is kill -9'd after the adapter's first checkpoint and the run, started again, resumes
from it (the base quantised again from the converted checkpoint); the export and its bounded check are LoRA's, on the
bf16 base the adapter is merged into; verify reports, not bounded, the merged model's distance to MaxText with the
base quantised as in training (docs/tuning.md)."""

from __future__ import annotations

import json

import pytest

from tests.workload.test_lora_pipeline import (
    CHECKPOINT_PERIOD,
    LORA,
    LoraResume,
    assert_it_trained_and_learned,
    killed_and_resumed,
)
from tests.workload.tiny_run import first_logged_step
from workload.measure import devices
from workload.measure.logit_parity import KL_BOUND
from workload.run import kept

QLORA = {**LORA, "tuning": "qlora", "loraWeightQtype": "int8"}
# Two CPU devices, every step of the run: the quantised model sharded over a mesh (fsdp) as over a VM's chips, which
# one device never shows, through the checkpoints, the resume and the export. Two, not more: the tiny data set holds
# the 20 steps' sequences at a global batch of 2 (at 4 it ran out at step 12).
ON_TWO_DEVICES = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}
RUNS_PREFIX = "qlora-runs"


@pytest.fixture(scope="module")
def qlora_run(maxtext_python, tiny_converted, gcs, tmp_path_factory) -> LoraResume:
    tmp = tmp_path_factory.mktemp("qlora")
    return killed_and_resumed(maxtext_python, tiny_converted, gcs, tmp, QLORA, RUNS_PREFIX, ON_TWO_DEVICES)


def test_the_adapter_trains_on_the_quantised_base_over_two_devices_and_the_held_out_loss_falls(qlora_run):
    assert_it_trained_and_learned(qlora_run.finished)
    (train_log,) = [p for p in qlora_run.summary["logs"] if "/train-" in p]
    with open(train_log, errors="replace") as f:
        [found] = [parsed for line in f if (parsed := devices.parse(line))]
    assert found["device_count"] == 2


def test_a_killed_qlora_run_resumes_on_the_adapter_it_had_at_its_checkpoint(qlora_run):
    """The resumed attempt starts after the checkpoint, and its first held-out pass, before any update, reads the
    killed attempt's at that step: the adapter restored, the base quantised again as before."""
    assert qlora_run.killed_at == CHECKPOINT_PERIOD
    assert qlora_run.interrupted.summary["failed_step"] == "train"
    (train_log,) = [p for p in qlora_run.summary["logs"] if "/train-" in p]
    assert first_logged_step(train_log) == CHECKPOINT_PERIOD + 1
    killed = {e["step"]: e["eval_loss"] for e in qlora_run.interrupted.events if e["event"] == "eval"}
    resumed = [e for e in qlora_run.finished.events if e["event"] == "eval"]
    assert resumed[0]["step"] == CHECKPOINT_PERIOD and killed[CHECKPOINT_PERIOD] != killed[0]
    assert resumed[0]["eval_loss"] == pytest.approx(killed[CHECKPOINT_PERIOD], abs=1e-3)  # MaxText logs 3 decimals


def test_the_export_is_faithful_to_the_adapter_on_the_bf16_base_and_its_distance_to_the_quantised_one_is_reported(
    qlora_run,
):
    verify = qlora_run.summary["verify"]
    assert verify["ok"], verify
    assert verify["logits_kl_max"] <= KL_BOUND["tiny"] and verify["adapter_logits_kl_max"] <= KL_BOUND["tiny"]
    # The base the adapter trained on is not the one it is merged into: the distance to it is the quantisation's.
    assert verify["quantised_base_logits_kl_max"] > verify["logits_kl_max"]
    print({k: v for k, v in verify.items() if "logits" in k})  # the figures, for the record (pytest -s)


def test_the_adapter_and_the_merged_model_are_kept(qlora_run):
    model_dir = qlora_run.summary["kept_dir"]
    with open(f"{model_dir}/{kept.ADAPTER}/adapter_config.json") as f:
        adapter = json.load(f)
    assert (adapter["r"], adapter["lora_alpha"], adapter["peft_type"]) == (LORA["loraRank"], LORA["loraAlpha"], "LORA")
    with open(f"{model_dir}/hf-model/config.json") as f:
        assert "quantization_config" not in json.load(f)  # the merge is into the unquantised base
