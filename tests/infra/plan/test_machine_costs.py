"""The machine follows the tuning: a v6e-1 (`ct6e-standard-1t`) and a v6e-4 (`ct6e-standard-4t`) are stacks of their
own, and every preview prices the same run on each machine of one VM beside the stack's own (`machineCosts`), where
the preflight did not find that its step does not fit there (infra/plan/machines.py). The records here are written
in the form `python -m workload.preflight` prints (its real output: tests/workload/preflight/test_preflight.py)."""

from __future__ import annotations

import json

import pytest
from pulumi import RunError

from infra.config.read_settings import parse
from infra.plan import throughput
from infra.plan.machines import costs
from infra.plan.reruns import render
from infra.preflight import compile_step
from infra.pricing.cost import BOOTSTRAP_HOURS, CONVERT_HOURS, EXPORT_HOURS
from rehearsal.engine import Stack, run_program
from tests.infra.estimates import eval_hours

GIB = 2**30
FIXED_HOURS = BOOTSTRAP_HOURS + CONVERT_HOURS + EXPORT_HOURS
INSTANCE = "gcp:compute/instance:Instance"
LORA = {"tpu-sft:trainer": "tunix", "tpu-sft:tuning": "lora", "tpu-sft:perDeviceBatchSize": "1"}
# Each machine's chips, topology and machine type: Google's v6e table (cloud.google.com/tpu/docs/v6e, "Supported
# configurations", read through the search tool on 2026-12-07), as workload/core/accelerators.py holds it.
ONE_VM = {"v6e-1": (1, "1x1", "ct6e-standard-1t"), "v6e-4": (4, "2x2", "ct6e-standard-4t")}
ONE_VM["v6e-8"] = (8, "2x4", "ct6e-standard-8t")


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    """This machine's own preflight records are not the test's."""
    monkeypatch.setattr(compile_step, "CACHE", tmp_path / "preflight")
    return tmp_path / "preflight"


def keep(config: dict[str, str], accelerator: str, *, fits: bool, step_s: float = 0.5, fix=None) -> None:
    """What `compile_once` keeps after `scripts/preflight … tpu-sft:acceleratorType=<accelerator>`."""
    pipeline = parse({**config, "tpu-sft:acceleratorType": accelerator}, stack="dev").pipeline
    path = compile_step.record_path(pipeline)
    path.parent.mkdir(parents=True, exist_ok=True)
    record = {
        "fits": fits,
        "accelerator": accelerator,
        "hbm_bytes_per_chip": (20.5 if fits else 58.73) * GIB,
        "hbm_limit_bytes_per_chip": 31.25 * GIB,
        "step_time": {"step_s": step_s, "tokens_per_s_per_chip": 2048 / step_s, "mfu": 0.5, "bound": "compute"},
    }
    path.write_text(json.dumps(record | ({"fix": fix} if fix else {})))


@pytest.mark.parametrize("name", ["v6e-1", "v6e-4"])
def test_a_sub_host_machine_is_one_vm_with_its_machine_type_its_chips_price_and_data_disk(mock_stack, name):
    chips, _, machine_type = ONE_VM[name]
    stack = mock_stack({"tpu-sft:acceleratorType": name})
    assert stack.one(INSTANCE).inputs["machineType"] == machine_type
    assert len(stack.of_type("gcp:compute/disk:Disk")) == 1  # the data disk, as on a v6e-8
    out = stack.outputs
    assert out["hourlyCostUsd"] == pytest.approx(chips * 2.70)
    assert out["estimatedRunCostUsd"] == pytest.approx(out["hourlyCostUsd"] * out["estimatedRunHours"], abs=0.01)


def test_a_lora_stacks_preview_prices_the_same_tokens_on_each_machine_that_fits(mock_stack, dev_config):
    """Each machine trains the v6e-8's tokens in as many steps as its chips take them, at its own predicted step."""
    config = {**dev_config, **LORA}
    step_s = {"v6e-1": 0.9, "v6e-4": 0.6, "v6e-8": 0.5}
    for name, seconds in step_s.items():
        keep(config, name, fits=True, step_s=seconds)
    out = mock_stack(LORA).outputs
    machines = out["machineCosts"]
    assert set(machines) == set(ONE_VM)
    tokens = out["runLength"]["tokens"]
    for name, (chips, topology, machine_type) in ONE_VM.items():
        shown = machines[name]
        steps = tokens // (chips * 2048)
        hours = round(FIXED_HOURS + steps * step_s[name] / 3600 + eval_hours(out), 3)
        assert shown == {
            "machineType": machine_type,
            "chips": chips,
            "topology": topology,
            "chosen": name == "v6e-8",
            "fits": True,
            "preflight": f"fits on a {name}: 20.50 GiB of HBM per chip of 31.25 GiB",
            "steps": steps,
            "tokens": tokens,
            "hourlyCostUsd": round(chips * 2.70, 2),
            "estimatedRunHours": hours,
            "estimatedRunCostUsd": round(round(chips * 2.70, 2) * hours, 2),
            "timedBy": shown["timedBy"],
        }
        assert shown["timedBy"].startswith("the preflight's record of these train inputs")
    chosen = machines["v6e-8"]
    assert (chosen["estimatedRunCostUsd"], chosen["estimatedRunHours"]) == (
        out["estimatedRunCostUsd"],
        out["estimatedRunHours"],
    )
    assert machines["v6e-1"]["estimatedRunCostUsd"] < chosen["estimatedRunCostUsd"]  # the slower step, on 1/8 the price


def test_a_machine_the_preflight_found_too_small_shows_its_verdict_and_no_cost(mock_stack, dev_config):
    """Full fine-tuning of gemma3-4b on one v6e chip: the weights and Adam's moments alone outgrow its HBM."""
    keep(dev_config, "v6e-1", fits=False)
    machines = mock_stack().outputs["machineCosts"]
    small = machines["v6e-1"]
    assert small["fits"] is False
    assert small["preflight"] == "does not fit on a v6e-1: 58.73 GiB of HBM per chip of 31.25 GiB"
    assert small["estimatedRunCostUsd"] is small["hourlyCostUsd"] is small["timedBy"] is None
    # Nothing compiled the v6e-4 yet: its cost is shown, and how to learn whether it fits.
    unknown = machines["v6e-4"]
    assert unknown["fits"] is None and unknown["estimatedRunCostUsd"] > 0
    how = "scripts/preflight tpu-sft:acceleratorType=v6e-4 says whether it fits"
    assert unknown["preflight"] == f"not compiled yet: {how}"


def test_a_stack_on_a_machine_the_preflight_found_too_small_is_refused_in_its_words(dev_config, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 34)  # an update needs one; the refusal comes before it is used
    fix = {"key": "tpu-sft:acceleratorType", "fix": "pulumi config set tpu-sft:acceleratorType v6e-4"}
    config = {**dev_config, "tpu-sft:perDeviceBatchSize": "1", "tpu-sft:maxTargetLength": "256"}
    keep(config, "v6e-1", fits=False, fix=fix)
    declared = Stack()
    with pytest.raises(RunError) as raised:
        run_program({**config, "tpu-sft:acceleratorType": "v6e-1"}, preview=False, into=declared)
    message = str(raised.value)
    assert message.startswith("tpu-sft:acceleratorType: is v6e-1, and a preflight of these train inputs (")
    assert "needs at least 58.73 GiB of HBM per chip of a v6e-1, 31.25 GiB allowed: no VM is created for it" in message
    assert message.endswith("Fix: pulumi config set tpu-sft:acceleratorType v6e-4") and "\n" not in message
    assert declared.resources == []


def test_a_slice_stack_prices_itself_beside_the_machines_of_one_vm(slice_stack):
    machines = slice_stack("v6e-16").outputs["machineCosts"]
    assert set(machines) == {*ONE_VM, "v6e-16"} and machines["v6e-16"]["chosen"]


def test_a_lora_run_is_not_timed_by_a_prediction_of_full_fine_tuning(dev_config, tmp_path, monkeypatch):
    """The bench's table names rows compiled before LoRA by no tuning: they train every weight."""
    row = {
        "configuration": {
            "accelerator_type": "v6e-8",
            "model": "gemma3-4b",
            "trainer": "tunix",
            "per_device_batch_size": 1,
            "sequence_length": 2048,
        },
        "step_time": {"step_s": 0.125, "tokens_per_s_per_chip": 16384.0, "mfu": 0.43, "bound": "compute"},
        "source": "a full fine-tuning case",
    }
    table = tmp_path / "step_predictions.json"
    table.write_text(json.dumps({"predictions": [row]}))
    monkeypatch.setattr(throughput, "PREDICTIONS", table)
    full = parse({**dev_config, **LORA, "tpu-sft:tuning": "full"}, stack="dev").pipeline
    lora = parse({**dev_config, **LORA}, stack="dev").pipeline
    assert throughput.predicted(full).source.endswith("a full fine-tuning case")
    assert throughput.predicted(lora).source.startswith("no prediction for these train inputs")


def test_the_plan_comment_prices_the_same_tokens_on_the_other_machines(dev_config):
    """What a pull request shows (`python -m infra.plan`), from the same figures as `machineCosts`."""
    keep(dev_config, "v6e-1", fits=False)
    keep(dev_config, "v6e-4", fits=True)
    settings = parse(dev_config, stack="dev")
    [line] = [line for line in render(settings, settings).splitlines() if line.startswith("The same tokens")]
    four = f"{costs(settings)['v6e-4']['estimatedRunCostUsd']:.2f}"
    assert line == (
        "The same tokens on another machine: v6e-1 (ct6e-standard-1t): does not fit on a v6e-1: 58.73 GiB of HBM per "
        f"chip of 31.25 GiB; v6e-4 (ct6e-standard-4t) ${four}."
    )
