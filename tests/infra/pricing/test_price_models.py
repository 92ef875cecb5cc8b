"""One price per way of paying: the preview names the provisioning model its estimate priced, the figure and where it
comes from, and never makes a figure up.

Google's words, read on 2026-12-05 through the search tool (no v6e figure in them): the stored
cloud.google.com/tpu/pricing ("Cloud TPU pricing") lists v2, v3 and v4 only; the Compute API reference
(Scheduling.ProvisioningModel) calls SPOT "Heavily discounted" and STANDARD "no discounts"; "About Flex-start VMs"
(cloud.google.com/compute/docs/instances/about-flex-start-vms) has flex-start and calendar-mode reservations "benefit
from DWS discounts". So the on-demand price, where it stands in for a missing one, is an upper bound, and says so.
The $2.70 on-demand figure is DESIGN.md's (us-east5, as published in 2024), not re-read here.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from infra.config.read_settings import parse
from infra.config.setting_table import PROVISIONING_MODELS
from infra.plan.reruns import render
from infra.pricing.cost import ON_DEMAND, V6E_CHIP_HOUR, chip_price

NOT_FOUND = "not found"


def test_the_table_has_a_row_per_provisioning_model_each_with_its_source():
    assert set(V6E_CHIP_HOUR) == set(PROVISIONING_MODELS)
    for model, listed in V6E_CHIP_HOUR.items():
        assert listed.source, model
        # A row carries Google's figure with where it was read, or says it was not found: nothing in between.
        assert (listed.usd_per_chip_hour is None) == (NOT_FOUND in listed.source), model
        assert "2026-12-05" in listed.source or "2024" in listed.source, model


@pytest.mark.parametrize("model", PROVISIONING_MODELS)
def test_a_missing_figure_is_never_invented(model):
    price = chip_price(model, None)
    listed = V6E_CHIP_HOUR[model]
    assert price.provisioning_model == model
    if listed.usd_per_chip_hour is None:
        assert price.usd_per_chip_hour == V6E_CHIP_HOUR[ON_DEMAND].usd_per_chip_hour
        assert NOT_FOUND in price.basis and "upper bound" in price.basis and "tpu-sft:pricePerChipHour" in price.basis
    else:
        assert price.usd_per_chip_hour == listed.usd_per_chip_hour


@pytest.mark.parametrize(
    ("overrides", "remove", "model"),
    [
        ({}, (), "RESERVATION_BOUND"),
        ({"tpu-sft:provisioningModel": "STANDARD"}, ("tpu-sft:reservation",), "STANDARD"),
        ({"tpu-sft:provisioningModel": "SPOT"}, ("tpu-sft:reservation",), "SPOT"),
        (
            {"tpu-sft:provisioningModel": "FLEX_START", "tpu-sft:maxRunHours": "4"},
            ("tpu-sft:reservation",),
            "FLEX_START",
        ),
    ],
)
def test_the_preview_names_the_price_model_it_used(mock_stack, overrides, remove, model):
    out = mock_stack(overrides, remove=remove).outputs
    price = out["tpuPrice"]
    assert price["provisioningModel"] == model
    assert price["basis"] == chip_price(model, None).basis
    assert out["hourlyCostUsd"] == pytest.approx(8 * price["usdPerChipHour"])


def test_the_stacks_own_price_is_named_as_its_own(mock_stack):
    out = mock_stack({"tpu-sft:pricePerChipHour": "1.5"}).outputs
    assert out["tpuPrice"] == {
        "provisioningModel": "RESERVATION_BOUND",
        "usdPerChipHour": 1.5,
        "basis": "tpu-sft:pricePerChipHour, set in the stack",
    }
    vm = mock_stack({"tpu-sft:pricePerChipHour": "1.5"}).one("gcp:compute/instance:Instance")
    assert vm.inputs["metadata"]["tpu-sft-usd-per-chip-hour"] == "1.5"  # the VM's own bill uses the same price


def test_the_plan_comment_names_the_price_model(dev_config):
    base = parse(dev_config, stack="dev")
    spot = {k: v for k, v in dev_config.items() if k != "tpu-sft:reservation"}
    head = parse({**spot, "tpu-sft:provisioningModel": "SPOT"}, stack="dev")
    text = render(base, head)
    assert f"Price model: SPOT at $2.70 per chip-hour ({chip_price('SPOT', None).basis})." in text


def test_the_docs_table_is_the_price_table():
    costs = (Path(__file__).resolve().parents[3] / "docs" / "costs.md").read_text()
    rows = dict(re.findall(r"^\| ([A-Z_]+) \| ([0-9.]+|not found) \| .+ \|$", costs, re.MULTILINE))
    assert rows == {
        model: NOT_FOUND if listed.usd_per_chip_hour is None else f"{listed.usd_per_chip_hour:.2f}"
        for model, listed in V6E_CHIP_HOUR.items()
    }
