"""The quality gate's settings (tpu-sft:evalGate, evalMargin): a bad value stops the preview in one line naming the key
and the fix, with nothing declared and no traceback; the defaults are block and 2 points; a blocking gate with the
eval off is refused where the stack publishes."""

from __future__ import annotations

import functools

import pytest
from pulumi import RunError

from infra.config import read_settings
from rehearsal.engine import Stack, run_program
from workload.core.config import ConfigError

PUBLISHING = {"tpu-sft:publishGcsUri": "gs://models/m"}

BAD = [
    ({"tpu-sft:evalGate": "strict"}, "tpu-sft:evalGate: 'strict' is not one of block, warn, off"),
    ({"tpu-sft:evalGate": "Block"}, "tpu-sft:evalGate: 'Block' is not one of block, warn, off"),
    ({"tpu-sft:evalMargin": "-1"}, "tpu-sft:evalMargin: expected a number of at least 0, got '-1'"),
    ({"tpu-sft:evalMargin": "two"}, "tpu-sft:evalMargin: expected a number of at least 0, got 'two'"),
    ({"tpu-sft:evalMargin": "nan"}, "tpu-sft:evalMargin: expected a number of at least 0, got 'nan'"),
    ({"tpu-sft:evalMargin": "150"}, "tpu-sft:evalMargin: is 150 points, but a score moves 100 points at most"),
]


@pytest.mark.parametrize(("overrides", "start"), BAD, ids=[next(iter(o.values())) for o, _ in BAD])
def test_a_bad_gate_setting_is_one_line_at_preview_with_nothing_declared(dev_config, overrides, start):
    declared = Stack()
    with pytest.raises(RunError) as raised:
        run_program({**dev_config, **PUBLISHING, **overrides}, into=declared)
    message = str(raised.value)
    assert message.startswith(start), message
    assert "\n" not in message and "Traceback" not in message
    assert "Fix: pulumi config set tpu-sft:eval" in message
    assert declared.resources == []


@pytest.mark.parametrize(
    ("margin", "ok"), [("0", True), ("100", True), ("2.5", True), ("-0.1", False), ("100.1", False)]
)
def test_the_margin_runs_from_0_to_100_points(dev_config, margin, ok):
    parse = functools.partial(read_settings.parse, stack="dev")
    if ok:
        assert parse({**dev_config, "tpu-sft:evalMargin": margin}).eval_margin == float(margin)
    else:
        with pytest.raises(ConfigError, match="^tpu-sft:evalMargin:"):
            parse({**dev_config, "tpu-sft:evalMargin": margin})


def test_the_defaults_block_at_2_points(dev_config):
    parsed = read_settings.parse(dev_config, stack="dev")
    assert (parsed.eval_gate, parsed.eval_margin) == ("block", 2.0)
    warned = read_settings.parse({**dev_config, "tpu-sft:evalGate": "warn", "tpu-sft:evalMargin": "3"}, stack="dev")
    assert (warned.eval_gate, warned.eval_margin) == ("warn", 3.0)


def test_a_blocking_gate_with_the_eval_off_is_refused_where_the_stack_publishes(dev_config):
    dev_config = {**dev_config, "tpu-sft:evalTasks": "off"}
    with pytest.raises(ConfigError) as raised:
        read_settings.parse({**dev_config, **PUBLISHING}, stack="dev")
    assert str(raised.value) == (
        "tpu-sft:evalGate: is block, but tpu-sft:evalTasks is off, so the publish step would find no eval report and "
        "refuse. Fix: pulumi config set tpu-sft:evalGate off to publish without the quality check, or pulumi config "
        "rm tpu-sft:evalTasks to evaluate with the default tasks"
    )
    for fine in ({**PUBLISHING, "tpu-sft:evalGate": "off"}, {**PUBLISHING, "tpu-sft:evalGate": "warn"}, {}):
        read_settings.parse({**dev_config, **fine}, stack="dev")  # no gate to block, or nothing published
