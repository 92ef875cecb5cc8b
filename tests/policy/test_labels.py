"""Every billable resource carries the labels the bill is split by (mandatory, keys configurable)."""

import pytest

from policy import labels

FULL = {"app": "tpu-sft", "stack": "dev", "owner": "ml-platform", "cost-center": "research"}


@pytest.mark.parametrize(
    ("given", "required"),
    [
        pytest.param(FULL, labels.DEFAULT_REQUIRED, id="defaults"),
        pytest.param({**FULL, "tpu-sft-role": "data"}, labels.DEFAULT_REQUIRED, id="extra-labels"),
        pytest.param({"team": "x"}, ["team"], id="configured-keys"),
        pytest.param({}, [], id="nothing-required"),
    ],
)
def test_passes(given, required):
    assert labels.missing("disk", {"labels": given}, required) == []


@pytest.mark.parametrize(
    ("props", "absent"),
    [
        pytest.param({}, "app, stack, owner, cost-center", id="no-labels"),
        pytest.param({"labels": None}, "app, stack, owner, cost-center", id="null-labels"),
        pytest.param({"labels": {"app": "tpu-sft", "stack": "dev"}}, "owner, cost-center", id="program-labels-only"),
        pytest.param({"labels": {**FULL, "owner": ""}}, "owner", id="empty-value"),
    ],
)
def test_fails_naming_the_missing_keys(props, absent):
    [message] = labels.missing("disk", props)
    assert message.startswith(f"disk lacks the label(s) {absent} ")
    first = absent.split(",")[0]
    assert f"pulumi config set --path tpu-sft:labels.{first} <value>" in message
