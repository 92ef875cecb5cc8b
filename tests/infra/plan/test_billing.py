"""What Google bills a stack for, as its outputs say under the mock engine: the TPU's basis per provisioning model
(the table in docs/costs.md, read here row by row), the disks by size and type, one run's checkpoints."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from infra.preflight import compile_step
from workload.core.models import MODELS

COSTS = Path(__file__).resolve().parents[3] / "docs" / "costs.md"
ROW = re.compile(
    r"^\| (RESERVATION_BOUND|STANDARD|SPOT|FLEX_START) \| (set|set \(required\)|unset) \| ([^|]+) \| (yes|no) \|$"
)


def table() -> list[tuple[str, bool, str, bool]]:
    rows = [ROW.match(line) for line in COSTS.read_text().splitlines()]
    return [(m[1], m[2].startswith("set"), m[3].strip(), m[4] == "yes") for m in rows if m]


def test_the_docs_table_names_every_provisioning_model():
    assert {(model, reserved) for model, reserved, _, _ in table()} == {
        ("RESERVATION_BOUND", True),
        ("STANDARD", True),
        ("STANDARD", False),
        ("SPOT", False),
        ("FLEX_START", False),
    }


@pytest.mark.parametrize(("model", "reserved", "billed_for", "autostop_saves"), table(), ids=lambda v: str(v)[:20])
def test_each_provisioning_model_is_billed_as_the_docs_table_says(
    mock_stack, model, reserved, billed_for, autostop_saves
):
    config = {"tpu-sft:provisioningModel": model}
    if model == "FLEX_START":
        config["tpu-sft:autostop"] = "delete"
    stack = mock_stack(config, remove=() if reserved else ("tpu-sft:reservation",))
    assert stack.outputs["tpuBilledFor"] == billed_for
    assert ("autostop saves no TPU money" not in billed_for) == autostop_saves


def test_the_disks_and_the_checkpoints_are_in_the_outputs(mock_stack, slice_stack):
    vm = mock_stack({"tpu-sft:dataDiskSizeGb": "300", "tpu-sft:diskPricePerGbMonth": "0.1"}).outputs
    assert vm["diskCost"] == {
        "disks": [
            {"disk": "boot", "count": 1, "gb": 200, "type": "hyperdisk-balanced", "usdPerMonth": 20.0},
            {
                "disk": "data",
                "count": 1,
                "gb": 300,
                "type": "hyperdisk-balanced",
                "performance": {
                    "provisionedIops": 3000,
                    "provisionedThroughputMiBps": 140,
                    "performanceUsdPerMonth": 0.0,
                    "keptModelWriteSeconds": 52.9,
                    "basis": "hyperdisk-balanced: the 3,000 IOPS and 140 MiB/s included",
                },
                "usdPerMonth": 30.0,
            },
        ],
        "usdPerMonth": 50.0,
    }
    # 250 steps at checkpointPeriod 63, MaxText's own loop: 5 checkpoints (indices 0, 63, 126, 189 and the final 249)
    # of 3,880,099,328 parameters × 12 bytes, kept 30 days; Tunix's loop saves 4 (after 63, 126, 189 and 250).
    assert MODELS["gemma3-4b"].parameters == 3_880_099_328  # docs/checkpoints.md
    assert vm["checkpointCost"] == {"checkpoints": 5, "gb": 232.8, "daysKept": 30, "usd": 4.59}
    # The kept model in the bucket (the VM's copy; a slice's only one): 3,880,099,328 parameters × 2 bytes (bfloat16)
    # at $0.020 per GB-month, until `pulumi destroy` deletes the bucket.
    assert vm["keptModelCost"] == {"gb": 7.8, "usdPerMonth": 0.16, "until": "pulumi destroy"}
    assert slice_stack("v6e-32").outputs["keptModelCost"] == vm["keptModelCost"]
    # A slice: each host's boot disk, at the list price; no data disk.
    assert slice_stack("v6e-32").outputs["diskCost"] == {
        "disks": [{"disk": "boot", "count": 8, "gb": 200, "type": "hyperdisk-balanced", "usdPerMonth": 128.0}],
        "usdPerMonth": 128.0,
    }


def test_the_docs_example_is_the_dev_stacks_outputs(mock_stack, tmp_path, monkeypatch):
    monkeypatch.setattr(compile_step, "CACHE", tmp_path / "preflight")  # the estimate from the shipped table only
    outputs = mock_stack().outputs
    text = COSTS.read_text()
    for key in ("hourlyCostUsd", "estimatedRunHours", "estimatedRunCostUsd"):  # the bill's example
        assert f"      {key:<21}{outputs[key]}\n" in text
    assert f"tpuBilledFor    {outputs['tpuBilledFor']}" in text
    assert '"usdPerMonth": 24.0}' in text and outputs["diskCost"]["usdPerMonth"] == 24.0
    assert outputs["checkpointCost"] == {"checkpoints": 5, "gb": 232.8, "daysKept": 30, "usd": 4.59}
    assert f"keptModelCost   {json.dumps(outputs['keptModelCost'], sort_keys=True)}" in text
