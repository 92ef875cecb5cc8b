"""`tpu-sft:evalTasks off`: the eval step serves nothing and records that it was off, beside the kept model and in its
copy, where publishing's gate reads it (workload/eval/gate.py: a missing report is not the same as none asked for)."""

from __future__ import annotations

import io
import json
import os
import sys

from workload.core.config import PipelineConfig
from workload.run import eval_step
from workload.run.events import Events
from workload.run.layout import Layout
from workload.run.phase_outcome import outcome_line
from workload.run.steps import Context


def test_eval_off_serves_nothing_and_says_so_beside_the_kept_model_and_its_copy(tmp_path):
    config = PipelineConfig.from_mapping({"evalTasks": "off"})
    layout = Layout(str(tmp_path / "work"), str(tmp_path / "disk"), config.model, "run", None, str(tmp_path / "copy"))
    out = io.StringIO()
    ctx = Context(config, layout, Events(out), sys.executable, "vm", dict(os.environ), lambda s: s, os.getcwd())
    outcome = eval_step.evaluate(ctx)  # no eval venv given: none is needed
    for root in (tmp_path / "disk", tmp_path / "copy"):
        assert json.loads((root / "run" / "eval" / "report.json").read_text()) == {"off": True}
    assert outcome.facts == {"eval": {"off": True}} and out.getvalue() == ""
    assert outcome_line("eval", {"ok": True, **outcome.facts}) == "✓ eval: off (tpu-sft:evalTasks off)"
