"""A run on the user's own JSON Lines file (real MaxText 0.2.2, tiny profile, CPU): the file split as `pulumi up`
splits it (infra/local_data.py, a share held out by the fixed seed), MaxText's HF pipeline reading the training
part through `hf_path=json` / `hf_train_files` and measuring the held-out loss on the held-out part through
`hf_eval_files`, with the user's chat template (`tpu-sft:chatTemplate`: here the tiny tokenizer's own, as a file
the train step places for `chat_template_path`), and the final checkpoint kept. Only the train step runs, from the
shared converted tiny model (`tiny_converted`): the convert and export around it are the tiny pipeline's own tests,
so this costs one short MaxText training, not another whole pipeline."""

from __future__ import annotations

import json

import pytest

from infra.local_data import split_share
from tests.fixtures.datasets import good_rows, write_jsonl
from tests.workload.tiny_run import TINY_SETTINGS, copy_converted, run_workload
from workload.tiny.assets import CHAT_TEMPLATE

STEPS = 2


@pytest.fixture(scope="module")
def trained_on_jsonl(maxtext_python, tiny_converted, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("local-jsonl")
    work, out, config = tmp / "work", tmp / "out", tmp / "settings.json"
    copy_converted(tiny_converted, work)
    chats = write_jsonl(tmp / "chats.jsonl", good_rows(80))
    train, held_out = split_share([str(chats)], 0.2)
    (tmp / "train.jsonl").write_text(train)
    (tmp / "held-out.jsonl").write_text(held_out)
    (tmp / "chat.jinja").write_text(CHAT_TEMPLATE)
    settings = {
        **TINY_SETTINGS,
        "steps": STEPS,
        "checkpointPeriod": STEPS,
        "evalInterval": STEPS,
        "evalSteps": 1,
        "dataset": str(tmp / "train.jsonl"),
        "evalData": str(tmp / "held-out.jsonl"),
        "chatTemplate": str(tmp / "chat.jinja"),
    }
    config.write_text(json.dumps(settings))
    return run_workload(maxtext_python, config, work, out, "--until", "train"), tmp


def test_maxtext_trains_on_the_jsonl_and_measures_the_held_out_share(trained_on_jsonl):
    run, _ = trained_on_jsonl
    summary = run.summary
    assert run.returncode == 0 and summary["ok"], f"{summary}\n{run.stderr[-3000:]}"
    assert summary["final_step"] == STEPS
    assert [step for step, _ in summary["eval_curve"]] == [0, STEPS]  # held-out loss before and after training
    assert summary["trained_checkpoint"].endswith(f"/{STEPS}/model_params")


def test_the_trainer_read_the_files_not_the_tiny_dataset(trained_on_jsonl):
    run, tmp = trained_on_jsonl
    (log,) = [path for path in run.summary["logs"] if "/train-" in path]
    with open(log) as f:
        argv = f.readline().split()  # the runner's first line: the command it ran (workload/launch/proc.py)
    assert "hf_path=json" in argv
    assert f"hf_train_files={tmp / 'train.jsonl'}" in argv and f"hf_eval_files={tmp / 'held-out.jsonl'}" in argv
    placed = tmp / "work" / "chat-template.jinja"
    assert f"chat_template_path={placed}" in argv and placed.read_text() == CHAT_TEMPLATE
