"""The quality gate before publishing: block refuses a worse fine-tune in one line, warn publishes and says it, off
reads nothing, and a missing or broken report never passes a blocking gate silently."""

from __future__ import annotations

import pytest

from tests.workload.eval.reports import comparisons, write_report
from workload.eval.gate import REPORT, judge, verdict

WORSE = 610  # GSM8K 0.71 → 0.61: 10 points down, a real drop
WITHIN = 690  # GSM8K 0.71 → 0.69: 2 points down, a real drop within the margin


def test_block_refuses_a_worse_fine_tune_in_one_line_naming_task_scores_report_and_fix(tmp_path):
    write_report(tmp_path, comparisons(WORSE))
    v = judge(str(tmp_path), "block", 2.0)
    assert v.blocks
    assert "\n" not in v.line
    assert "GSM8K 0.71 → 0.61 (−10.0 ± " in v.line
    assert "IFEval" not in v.line  # only the task that is worse
    assert f"report: {tmp_path}/{REPORT}" in v.line
    assert v.line.startswith("not published: the fine-tuned model is worse than its base beyond the 2-point margin")
    assert v.line.endswith("pulumi config set tpu-sft:evalGate warn, then pulumi up (nothing is trained again)")


def test_warn_publishes_and_says_the_same_finding(tmp_path):
    write_report(tmp_path, comparisons(WORSE))
    v = judge(str(tmp_path), "warn", 2.0)
    assert not v.blocks
    assert v.line.startswith("published with tpu-sft:evalGate warn, although the fine-tuned model is worse")
    assert "GSM8K 0.71 → 0.61" in v.line and f"{tmp_path}/{REPORT}" in v.line


def test_off_publishes_without_reading_the_report(tmp_path):
    (tmp_path / "eval").mkdir()
    (tmp_path / REPORT).write_text("{not json")
    v = judge(str(tmp_path), "off", 2.0)
    assert (v.blocks, v.comparisons, v.finding) == (False, (), None)
    assert v.line == "eval gate off: published without reading the eval report"


def test_a_drop_within_the_margin_passes_with_the_scores(tmp_path):
    write_report(tmp_path, comparisons(WITHIN))
    v = judge(str(tmp_path), "block", 2.0)
    assert not v.blocks and v.finding is None
    assert v.line.startswith("eval gate passed (2-point margin): IFEval strict 0.78 → 0.80 (+2.0 ± ")
    assert v.line.endswith("GSM8K 0.71 → 0.69 (−2.0 ± 0.8, within the margin)")


def test_the_gate_judges_at_its_own_margin_not_the_reports(tmp_path):
    write_report(tmp_path, comparisons(WORSE))  # judged at 2 points when the eval ran
    assert not judge(str(tmp_path), "block", 15.0).blocks
    write_report(tmp_path, comparisons(WITHIN))
    assert judge(str(tmp_path), "block", 1.0).blocks


@pytest.mark.parametrize(("mode", "blocks"), [("block", True), ("warn", False)])
def test_no_report_blocks_or_warns_never_passes_silently(tmp_path, mode, blocks):
    v = judge(str(tmp_path), mode, 2.0, shown_dir="gs://runs/models/run-1")
    assert v.blocks is blocks
    assert v.finding is not None
    assert "has no eval report (gs://runs/models/run-1/eval/report.json)" in v.line
    assert "\n" not in v.line


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ('{"tasks": [', "cannot be read (JSONDecodeError"),
        ('{"scores": []}', "is not an eval report"),
        ('{"tasks": [{"task": "gsm8k"}]}', "is not readable: a task's comparison lacks metric"),
        ('{"tasks": []}', "compares no task"),
    ],
)
def test_a_broken_report_blocks_in_one_line(tmp_path, text, problem):
    (tmp_path / "eval").mkdir()
    (tmp_path / REPORT).write_text(text)
    v = judge(str(tmp_path), "block", 2.0)
    assert v.blocks
    assert problem in v.line and "\n" not in v.line


@pytest.mark.parametrize(
    ("mode", "margin", "message"),
    [("strict", 2.0, "'strict': one of block, warn, off"), ("block", -1.0, "-1 points"), ("warn", 100.5, "100.5")],
)
def test_a_bad_mode_or_margin_is_refused(mode, margin, message):
    with pytest.raises(ValueError, match=message):
        verdict(None, mode, margin, "report.json")


def test_the_verdict_goes_into_the_publish_summary(tmp_path):
    write_report(tmp_path, comparisons(WORSE))
    summary = judge(str(tmp_path), "warn", 2.0).to_json()
    assert (summary["mode"], summary["found"], summary["blocked"], summary["margin_points"]) == (
        "warn",
        True,
        False,
        2.0,
    )
    assert [t["task"] for t in summary["tasks"]] == ["ifeval", "gsm8k"]
    assert [t["worse"] for t in summary["tasks"]] == [False, True]


def test_what_a_published_card_may_say_names_no_path(tmp_path):
    write_report(tmp_path, comparisons(WORSE))
    warned = judge(str(tmp_path), "warn", 2.0, shown_dir="gs://acme-private/kept/run-1")
    assert warned.public_line == (
        "published with tpu-sft:evalGate warn, although worse than the base beyond the 2-point margin on GSM8K"
    )
    write_report(tmp_path, comparisons(WITHIN))
    passed = judge(str(tmp_path), "block", 2.0).public_line
    assert passed == "passed: no benchmark worse than the base's by more than the 2-point margin"
    assert judge(str(tmp_path), "off", 2.0).public_line == "not applied (tpu-sft:evalGate off)"
    for line in (warned.public_line, passed):
        assert "acme-private" not in line and str(tmp_path) not in line


@pytest.mark.parametrize(("mode", "blocks"), [("block", True), ("warn", False)])
def test_a_report_of_the_eval_turned_off_is_said_so(tmp_path, mode, blocks):
    (tmp_path / "eval").mkdir()
    (tmp_path / REPORT).write_text('{"off": true}')  # what the eval step keeps with tpu-sft:evalTasks off
    v = judge(str(tmp_path), mode, 2.0)
    assert v.blocks is blocks and v.comparisons == ()
    assert f"the eval was off (tpu-sft:evalTasks off; {tmp_path}/{REPORT})" in v.line
    assert v.public_line == "published with tpu-sft:evalGate warn, without an eval to judge" or blocks
