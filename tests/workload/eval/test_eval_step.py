"""The eval step on the session's tiny pipeline (tests/workload/conftest.py `tiny_pipeline`, whose checkpoints are in
the IAM-enforcing bucket): the same run asked for `--until eval`, which evaluates the kept model and its random base
with real lm-eval and its real IFEval and GSM8K scoring, over the fixture tasks, against the loopback stand-in
server. Then the base's results come from the bucket for a second eval, and a re-run does nothing.

The evals here run with `evalLimit 4`: IFEval then scores only the fixture's first 4 prompts, which forbid the word
"fact" that the fine-tune learned to say (docs/eval.md, "The rehearsal's tasks"), so the real report says the
fine-tune is worse beyond any margin. On that report and that kept model, publishing is refused with
`--eval-gate block` and goes through with `warn`: issue 73's three rehearsed cases (a worse model blocked, `warn`
publishes, the base's scores cached) on the step's own output, with no eval run beyond the three. All 10 IFEval
prompts are scored by the recorded `pulumi up` (tests/e2e/test_pulumi_up.py: its eval line reads `IFEval strict
0.40 → …`, 4 of 10) and by `scripts/rehearse`, which set no limit."""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.workload.publish.cli import download, publish
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


# The fixture's IFEval prompts that forbid "fact" come first: with this limit they alone are scored.
LIMIT = 4


def _eval(tiny_pipeline, config: Path, maxtext_python, eval_python) -> Run:
    done = run_workload(
        maxtext_python,
        config,
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
def evaluated(tiny_pipeline, maxtext_python, eval_python, tmp_path_factory) -> Evaluated:
    # The tiny pipeline's settings with the limit: an eval setting, so nothing before the eval is done again.
    config = tmp_path_factory.mktemp("eval-limit") / "settings.json"
    config.write_text(json.dumps({**json.loads(tiny_pipeline.config.read_text()), "evalLimit": LIMIT}))
    first = _eval(tiny_pipeline, config, maxtext_python, eval_python)
    kept = Path(first.summary["kept_dir"])
    objects = tiny_pipeline.gcs.objects(CACHE_PREFIX)
    # Nothing of the eval kept (its folder and its done-marker gone): the next eval must come from the bucket.
    shutil.rmtree(kept / "eval")
    (tiny_pipeline.work / "markers" / "eval.json").unlink()
    cached = _eval(tiny_pipeline, config, maxtext_python, eval_python)
    again = _eval(tiny_pipeline, config, maxtext_python, eval_python)
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
    assert (ifeval.task, ifeval.metric, ifeval.n) == ("ifeval", "prompt_level_strict_acc", LIMIT)
    assert (gsm8k.task, gsm8k.metric, gsm8k.n) == ("gsm8k", "exact_match", 4)  # the fixture's 4: all within the limit
    # The fixtures' design (docs/eval.md): the random base never says "fact", so it meets the 4 prompts that forbid
    # the word, the only ones the limit scores; the fine-tuned model says "Here is fact N about …" and breaks all 4.
    scores = {
        m: [json.loads(x)["score"] for x in (evaluated.kept / "eval" / m / "ifeval.jsonl").read_text().splitlines()]
        for m in ("base", "tuned")
    }
    assert scores == {"base": [1.0] * 4, "tuned": [0.0] * 4}
    assert (ifeval.base, ifeval.tuned, ifeval.delta) == (1.0, 0.0, -1.0)
    # Every paired difference is −1, so every bootstrap resample's mean is: the interval is that point, below 0.
    assert (ifeval.low, ifeval.high) == (-1.0, -1.0) and ifeval.worse is True
    assert (gsm8k.base, gsm8k.tuned, gsm8k.worse) == (0.0, 0.0, False)
    for model in ("base", "tuned"):
        records = [
            json.loads(line) for line in (evaluated.kept / "eval" / model / "ifeval.jsonl").read_text().splitlines()
        ]
        assert [r["doc_id"] for r in records] == list(range(LIMIT))
        assert set(records[0]) == {"doc_id", "score", "prompt_level_loose_acc"}
        samples = list((evaluated.kept / "eval" / model / "lm-eval").rglob("samples_tpu_sft_ifeval_*.jsonl"))
        assert len(samples) == 1 and list((evaluated.kept / "eval" / model / "lm-eval").rglob("results_*.json"))
    assert report["limit"] == LIMIT
    assert report["models"]["tuned"] == str(evaluated.kept)
    assert evaluated.first.summary["eval"]["base_cached"] is False  # the report on disk is the cached eval's, below


def test_the_eval_line_shows_both_models_scores_and_the_worse_one(evaluated):
    # The eval phase itself succeeds: a worse model is the publish gate's to stop (docs/eval.md).
    assert outcome_line("eval", evaluated.first.summary) == (
        "⚠ eval: IFEval strict 1.00 → 0.00 (−100.0 ± 0.0, worse beyond the 2-point margin) · "
        "GSM8K 0.00 → 0.00 (+0.0 ± 0.0)"
    )
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


# Publishing the kept model on its real report, as the publish task runs it on the VM (tests/workload/publish/cli.py),
# to a path of the session's emulated bucket, as its owner: the grants a destination needs are the user's to give
# (tests/workload/publish/test_publish_bucket_iam.py).
def _publish(evaluated, tiny_pipeline, maxtext_python, staging: Path, destination: str, *extra: str):
    where = tiny_pipeline.gcs.gs(destination)
    return publish(
        maxtext_python, tiny_pipeline.gcs.url, evaluated.kept, "--gcs", where, "--staging-dir", str(staging), *extra
    )


def test_publish_refuses_the_worse_fine_tune_in_one_line_and_sends_nothing(
    evaluated, tiny_pipeline, maxtext_python, tmp_path
):
    code, summary = _publish(evaluated, tiny_pipeline, maxtext_python, tmp_path, "published/blocked")
    assert code == 2 and summary["ok"] is False and summary["published"] == {}
    assert summary["error"] == (
        "not published: the fine-tuned model is worse than its base beyond the 2-point margin on "
        f"IFEval strict 1.00 → 0.00 (−100.0 ± 0.0 points) (report: {evaluated.kept}/eval/report.json); "
        "to publish it anyway: pulumi config set tpu-sft:evalGate warn, then pulumi up (nothing is trained again)"
    )
    assert tiny_pipeline.gcs.objects("published/blocked") == {}
    assert (evaluated.kept / "hf-model" / "model.safetensors").is_file()  # the kept model stays


@pytest.fixture(scope="module")
def published_anyway(evaluated, tiny_pipeline, maxtext_python, tmp_path_factory) -> dict:
    staging = tmp_path_factory.mktemp("staging")
    code, summary = _publish(
        evaluated, tiny_pipeline, maxtext_python, staging, "published/warned", "--eval-gate", "warn"
    )
    assert code == 0, summary
    return summary


def test_with_the_gate_at_warn_the_same_model_publishes_and_says_why(evaluated, tiny_pipeline, published_anyway):
    gate = published_anyway["gate"]
    assert (gate["mode"], gate["found"], gate["blocked"]) == ("warn", True, False)
    assert gate["line"] == (
        "published with tpu-sft:evalGate warn, although the fine-tuned model is worse than its base beyond the "
        f"2-point margin on IFEval strict 1.00 → 0.00 (−100.0 ± 0.0 points) (report: {evaluated.kept}/eval/report.json)"
    )
    sent = tiny_pipeline.gcs.objects("published/warned/")
    assert {"model.safetensors", "config.json", "README.md", "tpu-sft/manifest.json"} <= {
        name.removeprefix("published/warned/") for name in sent
    }


def test_the_published_card_carries_both_models_scores_as_the_hubs_model_index(tiny_pipeline, published_anyway):
    card = download(tiny_pipeline.gcs.url, "published/warned/README.md", tiny_pipeline.gcs.bucket).decode()
    front, text = card.removeprefix("---\n").split("\n---\n", 1)
    (entry,) = yaml.safe_load(front)["model-index"]
    ifeval, gsm8k = entry["results"]
    # The rehearsal's fixtures, named as such: not IFEval's or GSM8K's Hub datasets, whose scores these are not.
    assert ifeval["dataset"] == {"type": "tpu_sft_ifeval", "name": "IFEval-format fixture"}
    assert gsm8k["dataset"] == {"type": "tpu_sft_gsm8k", "name": "GSM8K-format fixture"}
    assert [(m["type"], m["value"], m["name"]) for m in ifeval["metrics"]] == [
        ("prompt_level_strict_acc", 0.0, "IFEval strict, this fine-tune"),
        ("prompt_level_strict_acc", 1.0, "IFEval strict, the base model"),
    ]
    assert "| IFEval strict | 4 | 1.0000 | 0.0000 | -100.0 | -100.0 to -100.0 |" in text
    assert (
        "The publish gate: published with tpu-sft:evalGate warn, although worse than the base beyond the 2-point "
        "margin on IFEval strict." in text
    )
