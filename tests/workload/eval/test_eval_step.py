"""The eval step on the session's tiny pipeline (tests/workload/conftest.py `tiny_pipeline`, whose checkpoints are in
the IAM-enforcing bucket): the same run asked for `--until eval`, which evaluates the kept model and its random base
with real lm-eval and its real IFEval and GSM8K scoring, over the fixture tasks, against the loopback stand-in
server. Then the base's results come from the bucket for a second eval, and a re-run does nothing."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.workload.tiny_run import Run, run_workload
from workload.eval.compare import TaskComparison
from workload.run.eval_step import CACHE_PREFIX
from workload.run.phase_outcome import outcome_line


@dataclass
class Evaluated:
    first: Run  # both models evaluated
    cached: Run  # the eval again with nothing kept of it: the base's results from the bucket
    again: Run  # the same inputs once more
    kept: Path  # the kept model's folder
    cache_objects: dict[str, int]  # the bucket's eval-base/ objects after the first eval


def _eval(tiny_pipeline, maxtext_python, eval_python) -> Run:
    done = run_workload(
        maxtext_python,
        tiny_pipeline.config,
        tiny_pipeline.work,
        tiny_pipeline.out,
        "--runs-dir",
        tiny_pipeline.runs_url,
        "--until",
        "eval",
        "--eval-python",
        eval_python,
    )
    assert done.returncode == 0, f"{done.summary}\n{done.stderr[-3000:]}"
    return done


@pytest.fixture(scope="module")
def evaluated(tiny_pipeline, maxtext_python, eval_python) -> Evaluated:
    first = _eval(tiny_pipeline, maxtext_python, eval_python)
    kept = Path(first.summary["kept_dir"])
    objects = tiny_pipeline.gcs.objects(CACHE_PREFIX)
    # Nothing of the eval kept (its folder and its done-marker gone): the next eval must come from the bucket.
    shutil.rmtree(kept / "eval")
    (tiny_pipeline.work / "markers" / "eval.json").unlink()
    cached = _eval(tiny_pipeline, maxtext_python, eval_python)
    again = _eval(tiny_pipeline, maxtext_python, eval_python)
    return Evaluated(first, cached, again, kept, objects)


def _progress(run: Run) -> list[str]:
    return [e["message"] for e in run.events if e["event"] == "progress"]


def test_eval_runs_on_the_kept_model_after_keep_and_retrains_nothing(evaluated):
    assert evaluated.first.phases("start") == ["eval"]  # the tiny pipeline had kept the model
    assert set(evaluated.first.phases("skipped")) >= {"convert", "train", "export", "verify", "keep"}
    said = _progress(evaluated.first)
    assert any(m.startswith("serving the base model (chat_server): ") for m in said)
    assert any(m.startswith(f"serving the tuned model (chat_server): {evaluated.kept}/hf-model") for m in said)


def test_the_report_compares_both_models_scored_by_lm_evals_own_code(evaluated):
    report = json.loads((evaluated.kept / "eval" / "report.json").read_text())
    assert set(report) == {
        *("tasks", "key", "inputs", "lm_eval", "generation", "limit", "server", "models", "base_cached", "seconds")
    }
    ifeval, gsm8k = (TaskComparison.from_json(t) for t in report["tasks"])
    assert (ifeval.task, ifeval.metric, ifeval.n) == ("ifeval", "prompt_level_strict_acc", 10)
    assert (gsm8k.task, gsm8k.metric, gsm8k.n) == ("gsm8k", "exact_match", 4)
    # The fixtures' design (docs/eval.md): the random base never says "fact", so it meets the 4 prompts that forbid
    # the word and none of the 6 that ask for it; the fine-tuned model says "Here is fact N about …" and breaks all 4.
    scores = {
        m: [json.loads(x)["score"] for x in (evaluated.kept / "eval" / m / "ifeval.jsonl").read_text().splitlines()]
        for m in ("base", "tuned")
    }
    assert scores["base"] == [1.0] * 4 + [0.0] * 6 and ifeval.base == 0.4
    assert scores["tuned"][:4] == [0.0] * 4 and sum(scores["tuned"][4:]) >= 1  # meets some of the 6 it is asked
    assert ifeval.tuned == pytest.approx(sum(scores["tuned"]) / 10)
    assert ifeval.delta == pytest.approx(ifeval.tuned - ifeval.base)
    assert (gsm8k.base, gsm8k.tuned) == (0.0, 0.0)
    for model in ("base", "tuned"):
        records = [
            json.loads(line) for line in (evaluated.kept / "eval" / model / "ifeval.jsonl").read_text().splitlines()
        ]
        assert [r["doc_id"] for r in records] == list(range(10))
        assert set(records[0]) == {"doc_id", "score", "prompt_level_loose_acc"}
        samples = list((evaluated.kept / "eval" / model / "lm-eval").rglob("samples_tpu_sft_ifeval_*.jsonl"))
        assert len(samples) == 1 and list((evaluated.kept / "eval" / model / "lm-eval").rglob("results_*.json"))
    assert report["models"]["tuned"] == str(evaluated.kept)
    assert evaluated.first.summary["eval"]["base_cached"] is False  # the report on disk is the cached eval's, below


def test_the_eval_line_shows_both_models_scores(evaluated):
    line = outcome_line("eval", evaluated.first.summary)
    tuned = evaluated.first.summary["eval"]["tasks"][0]["tuned"]
    assert line is not None and line.startswith(f"✓ eval: IFEval strict 0.40 → {tuned:.2f} (")
    assert " · GSM8K 0.00 → 0.00 (+0.0 ± 0.0)" in line
    assert evaluated.first.summary["until"] == "eval" and evaluated.first.summary["final_step"] is not None


def test_the_base_results_are_cached_in_the_bucket_and_the_second_eval_serves_only_the_tuned_model(evaluated):
    assert any(name.endswith("/key.json") for name in evaluated.cache_objects)
    assert any(name.endswith("/ifeval.jsonl") for name in evaluated.cache_objects)
    said = _progress(evaluated.cached)
    assert any(m.startswith("base model's results from the cache: gs://") for m in said)
    assert not any(m.startswith("serving the base model") for m in said)
    facts = evaluated.cached.summary["eval"]
    assert facts["base_cached"] is True and facts["seconds"]["base"] is None
    assert json.loads((evaluated.kept / "eval" / "report.json").read_text())["base_cached"] is True
    assert facts["tasks"] == evaluated.first.summary["eval"]["tasks"]  # the same scores, the same interval
    assert outcome_line("eval", evaluated.cached.summary).endswith("· base model's scores from the cache")


def test_a_rerun_with_the_same_inputs_evaluates_nothing(evaluated):
    assert evaluated.again.phases("start") == []
    assert evaluated.again.summary["eval"]["tasks"] == evaluated.first.summary["eval"]["tasks"]
    assert _progress(evaluated.again) == []
