"""The eval phase in the preview's time and cost: issue 73's figures, marked as an estimate, per task and per model, a
first run serving both models and a cheaper one with the base's scores cached; nothing where the eval is off."""

from __future__ import annotations

import pytest

from infra.config.read_settings import parse
from infra.plan.reruns import render
from infra.pricing.eval_cost import EvalEstimate, eval_of
from tests.infra.estimates import eval_hours

OFF = {"tpu-sft:evalTasks": "off"}
BOTH = {"tpu-sft:evalTasks": '["ifeval", "gsm8k"]'}


def test_both_tasks_whole_cost_two_loads_and_four_task_runs():
    e = EvalEstimate(("ifeval", "gsm8k"), None)
    assert e.task_minutes("ifeval") == e.task_minutes("gsm8k") == (1.0, 3.0)
    assert e.minutes(2) == (2 * (3 + 1 + 1), 2 * (5 + 3 + 3))  # base and fine-tuned: 10-22 min
    assert e.minutes(1) == (5, 11)  # the base's scores cached: the fine-tuned model alone
    assert e.hours == round(22 / 60, 3)


def test_a_limit_scales_each_task_by_its_share_not_the_loading():
    e = EvalEstimate(("ifeval", "gsm8k"), 100)
    assert e.task_minutes("ifeval") == (round(100 / 541, 2), round(300 / 541, 2))
    assert e.task_minutes("gsm8k") == (round(100 / 1319, 2), round(300 / 1319, 2))
    assert e.minutes(2)[0] > 2 * 3  # each model's load stays
    assert EvalEstimate(("gsm8k",), 5000).task_minutes("gsm8k") == (1.0, 3.0)  # a limit past the task: all of it


def test_the_output_says_per_task_per_model_both_cases_and_that_it_is_an_estimate():
    shown = EvalEstimate(("gsm8k",), None).output(hourly_usd=21.6)
    assert shown["tasks"] == {"gsm8k": {"minutesPerModel": [1.0, 3.0], "samples": None}}
    assert shown["firstRun"] == {"models": 2, "minutes": [8.0, 16.0], "usd": [2.88, 5.76]}
    assert shown["baseCached"] == {"models": 1, "minutes": [4.0, 8.0], "usd": [1.44, 2.88]}
    assert shown["baseCached"]["usd"][1] < shown["firstRun"]["usd"][1]
    assert shown["basis"].startswith("an estimate from issue 73's figures for a v6e-8, not measured")


def test_eval_off_adds_nothing(dev_config):
    assert eval_of(parse({**dev_config, **OFF}, stack="dev").pipeline) is None


def test_the_preview_adds_the_eval_to_the_runs_hours_and_cost(mock_stack):
    off = mock_stack(OFF).outputs
    assert off.get("evalEstimate") is None and eval_hours(off) == 0  # a null output is not shown
    on = mock_stack(BOTH).outputs
    assert on["evalEstimate"]["firstRun"]["minutes"] == [10.0, 22.0]
    assert on["estimatedRunHours"] == pytest.approx(off["estimatedRunHours"] + 22 / 60, abs=2e-3)
    assert on["estimatedRunCostUsd"] > off["estimatedRunCostUsd"]
    assert on["evalEstimate"]["firstRun"]["usd"][1] == round(on["hourlyCostUsd"] * 22 / 60, 2)


def test_the_plan_comment_shows_the_eval_line(dev_config):
    settings = parse({**dev_config, **BOTH, "tpu-sft:evalLimit": "50"}, stack="dev")
    (line,) = [line for line in render(settings, settings).splitlines() if line.startswith("Eval (")]
    assert line.startswith("Eval (ifeval 0.09-0.28 min a model, gsm8k 0.04-0.11 min a model, 50 samples a task): ")
    assert "serving both models" in line and "with the base's scores cached (an estimate from issue 73" in line
    off = parse({**dev_config, **OFF}, stack="dev")
    assert "Eval (" not in render(off, off)
