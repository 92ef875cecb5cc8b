"""What `pulumi up` hands the user: names, the exact ssh commands, the disk, and what it costs."""

import json
import re

import pytest

from infra.config.read_settings import parse
from infra.plan import throughput
from infra.plan.reruns import render
from infra.preflight import compile_step
from infra.pricing.cost import BOOTSTRAP_HOURS, CONVERT_HOURS, EXPORT_HOURS
from infra.pricing.eval_cost import eval_hours
from rehearsal.engine import is_secret, plain


def test_outputs(mock_stack):
    out = mock_stack().outputs
    assert out["instanceName"] == "tpu-sft-dev"
    assert out["zone"] == "us-east5-b"
    assert re.fullmatch(r"tpu-sft-dev-data-[0-9a-f]{7}", out["dataDiskName"])  # Pulumi's auto-name
    assert out["dataDiskMountPoint"] == "/mnt/tpu-sft-data"
    assert out["gcloudSshCommand"] == (
        "gcloud compute ssh tpu-sft@tpu-sft-dev --zone=us-east5-b --project=my-tpu-project --tunnel-through-iap"
    )
    assert out["sshCommand"] == (
        "ssh -i ~/.ssh/google_compute_engine -o 'ProxyCommand=gcloud compute start-iap-tunnel tpu-sft-dev 22 "
        "--listen-on-stdin --zone=us-east5-b --project=my-tpu-project --verbosity=warning' tpu-sft@tpu-sft-dev"
    )


def test_direct_access_uses_external_ip(mock_stack):
    out = mock_stack({"tpu-sft:access": "direct", "tpu-sft:sshSourceRanges": '["203.0.113.0/24"]'}).outputs
    assert out["sshCommand"] == "ssh -i ~/.ssh/google_compute_engine tpu-sft@203.0.113.7"
    assert out["gcloudSshCommand"].endswith("--project=my-tpu-project")


def test_cost_is_chips_times_price(mock_stack):
    out = mock_stack().outputs
    assert out["hourlyCostUsd"] == pytest.approx(8 * 2.70)
    assert out["estimatedRunCostUsd"] == pytest.approx(out["hourlyCostUsd"] * out["estimatedRunHours"], abs=0.01)
    # What the estimate is of: the seed's tokens (1,000 steps of 1 x 2,048 on each of the v6e-8's chips) in 250 steps
    # of the stack's batch 4.
    assert out["runLength"] == {"steps": 250, "tokensPerStep": 65536, "tokens": 16_384_000}


def test_a_larger_batch_runs_the_same_tokens_in_fewer_steps_for_less(mock_stack):
    base = mock_stack({"tpu-sft:perDeviceBatchSize": "1"}).outputs  # the seed's batch
    out = mock_stack({"tpu-sft:perDeviceBatchSize": "4"}).outputs  # both batches have a prediction on file
    assert base["runLength"] == {"steps": 1000, "tokensPerStep": 16384, "tokens": 16_384_000}
    assert out["runLength"] == {"steps": 250, "tokensPerStep": 65536, "tokens": 16_384_000}
    assert out["throughput"]["source"].startswith("the bench's table") and out["throughput"]["perDeviceBatchSize"] == 4
    assert out["estimatedRunHours"] < base["estimatedRunHours"]


def test_the_example_stacks_preview_shows_the_chosen_configuration_its_prediction_time_and_cost(
    mock_stack, dev_config, tmp_path, monkeypatch
):
    """Issue 54's acceptance: `pulumi preview` on Pulumi.dev.yaml as shipped names the chip's chosen loop and batch,
    and times and prices the run by that configuration's prediction in the bench's table, as the plan comment does."""
    monkeypatch.setattr(compile_step, "CACHE", tmp_path / "preflight")  # this machine's own records are not shipped
    [row] = [
        r
        for r in json.loads(throughput.PREDICTIONS.read_text())["predictions"]
        if r["source"].startswith("bench/step_time.py case v6e-8-native-b4-f32,")
    ]
    step = row["step_time"]
    out = mock_stack().outputs
    training_hours = round(250 * step["step_s"] / 3600, 3)  # the seed's tokens: 250 steps of 4 x 2,048 a chip
    assert out["throughput"] == {
        "trainer": "native",
        "perDeviceBatchSize": 4,
        "maxTargetLength": 2048,
        "stepSeconds": round(step["step_s"], 4),
        "tokensPerSecondPerChip": round(step["tokens_per_s_per_chip"]),
        "mfu": round(step["mfu"], 3),
        "boundBy": "HBM",
        "source": f"the bench's table, step_predictions.json: {row['source']}",
        "trainingHours": training_hours,
    }
    settings = parse(dev_config, stack="dev")
    evaluated = eval_hours(settings.pipeline)  # the eval phase's estimate, both tasks' upper end: 22 min
    assert evaluated == round(22 / 60, 3)
    run_hours = round(BOOTSTRAP_HOURS + CONVERT_HOURS + EXPORT_HOURS + 250 * step["step_s"] / 3600 + evaluated, 3)
    assert (out["estimatedRunHours"], out["estimatedRunCostUsd"]) == (run_hours, round(21.6 * run_hours, 2))
    text = render(settings, settings)  # the plan comment of a change that keeps the example stack's run
    cost = f"${out['estimatedRunCostUsd']:.2f}"
    assert f"Estimated cost of a full run: {cost} → {cost} ($21.60/h while the VM exists)." in text
    [line] = [line for line in text.splitlines() if line.startswith("Throughput: ")]
    assert line.startswith(
        f"Throughput: native loop, 4 × 2,048 tokens a chip on v6e-8: {step['step_s']:.3f} s a step, "
        f"{step['tokens_per_s_per_chip']:,.0f} tokens/s per chip, {step['mfu']:.0%} MFU, bound by HBM; "
        f"training {training_hours:.2f} h (predicted: the bench's table"
    )


def test_price_override_and_longer_run(mock_stack):
    base = mock_stack().outputs
    out = mock_stack({"tpu-sft:pricePerChipHour": "1.5", "tpu-sft:steps": "5000"}).outputs
    assert out["hourlyCostUsd"] == pytest.approx(12.0)
    assert out["estimatedRunHours"] > base["estimatedRunHours"]


def test_the_price_travels_in_the_vms_metadata_for_its_own_bill(mock_stack):
    """workload/spend/bill.py reads it there: a price change updates metadata in place and re-runs no phase."""
    vm = mock_stack({"tpu-sft:pricePerChipHour": "1.5"}).one("gcp:compute/instance:Instance")
    assert vm.inputs["metadata"]["tpu-sft-usd-per-chip-hour"] == "1.5"


def test_the_target_output_is_what_every_task_gets_and_holds_no_secret(mock_stack, gcloud_home):
    """scripts/tpu-sft reads the VM from it (remote/stack/outputs.py): a key path, never key material, no token."""
    token = "hf_" + "Abc123" * 6
    stack = mock_stack({"tpu-sft:hfToken": token}, secret_keys=("tpu-sft:hfToken",))
    out = stack.outputs
    tasks = [r for r in stack.of_type("command:local:Command") if r.name.endswith("-train")]
    assert out["target"] == tasks[0].inputs["environment"]["TPU_SFT_TARGET"]
    assert not is_secret(out["target"])
    target = json.loads(out["target"])
    assert target["key_path"] == "~/.ssh/google_compute_engine"
    private_key = (gcloud_home / ".ssh/google_compute_engine").read_text()
    shown = json.dumps(plain(out))
    assert token not in shown and private_key.strip().splitlines()[1] not in shown and "PRIVATE KEY" not in shown
    assert (out["project"], out["zone"], out["instanceName"]) == ("my-tpu-project", "us-east5-b", "tpu-sft-dev")


def test_a_slices_target_output_names_its_hosts(slice_stack):
    target = json.loads(slice_stack("v6e-16").outputs["target"])
    assert target["host"].endswith("-01") and len(target["workers"]) == 3
    assert target["profile"]["kept_dir"].startswith("gs://")


def test_each_phases_outcome_is_an_output_printed_when_pulumi_up_ends(dev_config, monkeypatch):
    """pulumi-command's output is status messages, gone when `pulumi up` ends; the outputs are printed then."""
    from rehearsal.engine import run_program

    monkeypatch.setenv("HF_TOKEN", "hf_" + "Tok3n" * 8)  # an update needs one
    train = {"event": "summary", "ok": True, "eval_loss_first": 1.91, "eval_loss_final": 1.52, "learned": True}
    train |= {"tokens_per_s": 41234.6, "mfu": 0.4123}
    bill = {"vm_up_s": 4932, "chips": 8, "chip_hours": 10.96, "usd_per_chip_hour": 2.7, "cost_usd": 29.59}
    export = {**train, "kept_dir": "/mnt/tpu-sft-data/tpu-sft/run", "verify": {"ok": True}, "bill": bill}
    stdout = {"train": json.dumps(train) + "\n", "export": json.dumps(export) + "\n"}
    phases = run_program(dev_config, preview=False, command_stdout=stdout).outputs["phases"]
    assert phases == {
        "train": "✓ train: held-out loss 1.910 → 1.520 (it learned) · 41,235 tokens/s · MFU 41.2%",
        "export": "✓ export: model at /mnt/tpu-sft-data/tpu-sft/run · verified · bill 10.96 chip-hours ≈ $29.59",
    }
    assert "phases" not in run_program(dev_config).outputs  # a preview: nothing has run
