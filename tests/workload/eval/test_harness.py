"""The eval's parts on their own: the per-sample records read from lm-eval's samples, the lock and the code naming one
lm-eval and one vLLM TPU, the fixture tasks being the real tasks' YAMLs, and NLTK kept off the network."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest

from workload.core import lock
from workload.core.eval_tasks import TASKS
from workload.eval import harness, records, server
from workload.eval.lm_eval_offline import EXIT_NO_PUNKT, EXIT_NO_SERVER

REPO = Path(__file__).resolve().parents[3]
FIXTURES = REPO / harness.FIXTURES


def _samples(directory: Path, task: str, lines: list[dict]) -> None:
    model = directory / "base"
    model.mkdir(parents=True, exist_ok=True)
    (model / f"samples_{task}_2026-12-07T12-00-00.000001.jsonl").write_text(
        "".join(json.dumps(s) + "\n" for s in lines)
    )


def test_records_are_lm_evals_own_scores_of_the_gate_filter_in_doc_order(tmp_path):
    _samples(
        tmp_path,
        "gsm8k",
        [
            {"doc_id": 1, "filter": "strict-match", "exact_match": 1.0},
            {"doc_id": 0, "filter": "strict-match", "exact_match": 0.0},
            {"doc_id": 0, "filter": "flexible-extract", "exact_match": 1.0},  # not the gate's filter
        ],
    )
    assert records.read(str(tmp_path), TASKS["gsm8k"], "gsm8k") == [
        {"doc_id": 0, "score": 0.0},
        {"doc_id": 1, "score": 1.0},
    ]
    _samples(
        tmp_path,
        "ifeval",
        [{"doc_id": 0, "filter": "none", "prompt_level_strict_acc": False, "prompt_level_loose_acc": True}],
    )
    assert records.read(str(tmp_path), TASKS["ifeval"], "ifeval") == [
        {"doc_id": 0, "score": 0.0, "prompt_level_loose_acc": 1.0}
    ]


def test_a_task_without_samples_or_without_its_metric_is_named_in_one_line(tmp_path):
    with pytest.raises(records.RecordsMissing, match=r"lm-eval wrote no samples for gsm8k under "):
        records.read(str(tmp_path), TASKS["gsm8k"], "gsm8k")
    _samples(tmp_path, "gsm8k", [{"doc_id": 0, "filter": "strict-match"}])
    with pytest.raises(records.RecordsMissing, match=r"a sample lacks 'exact_match' for filter strict-match"):
        records.read(str(tmp_path), TASKS["gsm8k"], "gsm8k")


def test_the_locks_and_the_code_name_one_lm_eval_and_one_vllm_tpu():
    vm = lock.versions(lock.EVAL_LOCK)
    rehearsal = lock.versions(str(REPO / "workload" / "eval-rehearsal-requirements.txt"))
    assert vm["lm-eval"] == rehearsal["lm-eval"] == harness.LM_EVAL_VERSION
    assert vm["vllm-tpu"] == vm["tpu-inference"] == server.VLLM_TPU_VERSION
    assert "vllm-tpu" not in rehearsal and "torch" not in rehearsal  # the MaxText venv's torch, no vLLM
    # The rehearsal's eval venv adds nothing the MaxText venv pins: it reads those through a .pth file.
    assert not set(rehearsal) & set(lock.versions())


def test_lm_eval_is_asked_the_same_for_both_models_and_only_the_server_differs():
    served = server.Served("vllm", ("vllm",), {}, "base", 8000)
    argv = harness.argv(
        "py",
        served,
        ("ifeval", "gsm8k"),
        output_dir="/out",
        limit=None,
        fixtures_dir=None,
        server_pid=1,
        server_log="l",
    )
    tuned = harness.argv(
        "py",
        server.Served("vllm", ("vllm",), {}, "tuned", 8001),
        ("ifeval", "gsm8k"),
        output_dir="/out",
        limit=None,
        fixtures_dir=None,
        server_pid=2,
        server_log="l",
    )
    differing = {a for a in set(argv) ^ set(tuned)}
    assert all(re.search(r"800[01]|base|tuned|^[12]$", a) for a in differing)
    assert argv[argv.index("--model") + 1] == "local-chat-completions"
    model_args = argv[argv.index("--model_args") + 1]
    assert "base_url=http://127.0.0.1:8000/v1/chat/completions" in model_args
    assert "tokenized_requests=False" in model_args and "num_concurrent=32" in model_args
    assert {"--apply_chat_template", "--fewshot_as_multiturn", "--log_samples"} <= set(argv)
    assert "--require-punkt" in argv and "--include_path" not in argv and "--limit" not in argv
    quick = harness.argv(
        "py", served, ("gsm8k",), output_dir="/o", limit=5, fixtures_dir="/f", server_pid=1, server_log="l"
    )
    assert quick[quick.index("--limit") + 1] == "5" and quick[quick.index("--tasks") + 1] == "tpu_sft_gsm8k"
    assert "--require-punkt" not in quick and quick[quick.index("--include_path") + 1] == "/f"


def _yaml(path: Path) -> dict:
    """A task YAML, with lm-eval's `!function` tags read as their target's name."""
    import yaml

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!function", lambda loader, node: f"!function {loader.construct_scalar(node)}")
    return yaml.load(path.read_text(), Loader=Loader)


@pytest.mark.parametrize("name", list(TASKS))
def test_each_fixture_task_is_the_real_tasks_yaml_but_its_rows_and_length(name, eval_python):
    site = subprocess.run(
        [eval_python, "-c", "import lm_eval, os; print(os.path.dirname(lm_eval.__file__))"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    real = _yaml(Path(site) / "tasks" / name / f"{name}.yaml")
    fixture = _yaml(FIXTURES / f"{TASKS[name].fixture}.yaml")
    own = {"task", "dataset_path", "dataset_name", "dataset_kwargs", "test_split", "num_fewshot", "generation_kwargs"}
    own |= {"training_split", "fewshot_split", "tag"}  # GSM8K's few-shot source, which the fixture does not use
    for key in set(real) | set(fixture):
        if key in own:
            continue
        theirs, ours = real.get(key), fixture.get(key)
        if isinstance(theirs, str) and theirs.startswith("!function utils."):
            theirs = theirs.replace("utils.", "ifeval_scoring.")  # lm-eval's own functions, re-exported
        if key == "metric_list":
            for metric in theirs:
                if str(metric.get("aggregation", "")).startswith("!function utils."):
                    metric["aggregation"] = metric["aggregation"].replace("utils.", "ifeval_scoring.")
        assert ours == theirs, key
    assert fixture["generation_kwargs"] == {**real["generation_kwargs"], "max_gen_toks": 16}


def test_the_fixtures_are_in_the_real_tasks_formats():
    ifeval = [json.loads(line) for line in (FIXTURES / "ifeval.jsonl").read_text().splitlines()]
    assert all({"key", "prompt", "instruction_id_list", "kwargs"} == set(row) for row in ifeval)
    assert all(len(row["instruction_id_list"]) == len(row["kwargs"]) for row in ifeval)
    ids = [row["instruction_id_list"][0] for row in ifeval]
    assert ids == ["keywords:forbidden_words"] * 4 + ["keywords:existence"] * 6  # the worse case first (evalLimit 4)
    gsm8k = [json.loads(line) for line in (FIXTURES / "gsm8k.jsonl").read_text().splitlines()]
    assert all(re.search(r"\n#### -?[0-9]+$", row["answer"]) for row in gsm8k)


def test_without_punkt_tab_the_real_ifeval_stops_in_one_line_and_nothing_is_downloaded(tmp_path, eval_python):
    env = {**os.environ, "NLTK_DATA": str(tmp_path), "PYTHONPATH": str(REPO), "HOME": str(tmp_path)}
    done = subprocess.run(
        [eval_python, "-m", "workload.eval.lm_eval_offline", "--require-punkt", "run", "--tasks", "ifeval"],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == EXIT_NO_PUNKT
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("lm_eval_offline: NLTK's punkt_tab is not in ") and line.endswith(
        "run bootstrap again (it installs punkt_tab into the eval venv)"
    )
    assert not any(tmp_path.iterdir())  # nothing downloaded into NLTK_DATA or the home


def test_a_server_that_exits_before_it_answers_stops_lm_eval_in_one_line(tmp_path, eval_python):
    """The step starts the server and lm-eval at once; lm-eval waits for the server, which here dies at start (and
    stays a zombie, as the step reaps it only afterwards)."""
    served = server.Served("chat_server", ("python3", "-c", "raise SystemExit(3)"), {}, "base", server.free_port())
    log = tmp_path / "server.log"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    with server.serving(served, env, str(log), str(tmp_path)) as pid:
        argv = harness.argv(
            eval_python,
            served,
            ("gsm8k",),
            output_dir=str(tmp_path / "out"),
            limit=1,
            fixtures_dir=str(FIXTURES),
            server_pid=pid,
            server_log=str(log),
        )
        done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == EXIT_NO_SERVER
    (line,) = done.stderr.strip().splitlines()
    assert line == (
        f"lm_eval_offline: the server (pid {pid}) exited before it answered at {served.models_url}; see {log}"
    )
