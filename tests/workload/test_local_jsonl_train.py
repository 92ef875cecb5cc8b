"""A run on the user's own JSON Lines file (real MaxText 0.2.3, tiny profile, CPU), end to end but for the VM: the
file and a chat template of the user's resolved as `pulumi up` resolves them (infra/config/local_data.py: a share held
out by the fixed seed, every object named by its content hash), those objects put in the checkpoint bucket (the
IAM-enforcing stand-in, `gcs`, which MaxText reaches as the VM's service account with the grants the program
declared), and MaxText's HF pipeline reading the training part from the bucket through `hf_path=json` /
`hf_train_files`, measuring the held-out loss on the held-out part through `hf_eval_files`, with the template the
train step placed for `chat_template_path`; the final checkpoint is kept. Only the train step runs, from the shared
converted tiny model (`tiny_converted`): the convert and export around it are the tiny pipeline's own tests, so
this costs one short MaxText training (~150 s of CPU here), not another whole pipeline."""

from __future__ import annotations

import json
import shutil

import pytest

from infra.config.local_data import resolve
from tests.fixtures.datasets import good_rows, write_jsonl
from tests.workload.tiny_run import TINY_SETTINGS, copy_converted, run_workload
from workload.core.config import PipelineConfig
from workload.tiny.assets import CHAT_TEMPLATE

STEPS = 2


@pytest.fixture(scope="module")
def trained_on_jsonl(maxtext_python, tiny_converted, gcs, tmp_path_factory):
    tmp = tmp_path_factory.mktemp("local-jsonl")
    work, out, config = tmp / "work", tmp / "out", tmp / "settings.json"
    copy_converted(tiny_converted, work)
    chats = write_jsonl(tmp / "chats.jsonl", good_rows(80))
    (tmp / "chat.jinja").write_text(CHAT_TEMPLATE)  # the tiny tokenizer's own, as the user's file
    user = {"dataset": str(chats), "evalData": "20%", "chatTemplate": str(tmp / "chat.jinja")}
    local = resolve(PipelineConfig.from_mapping(user), gcs.bucket)
    copies = tmp / "copies"
    for upload in local.uploads:  # what the program's BucketObjects hold (infra/resources/data_access.py)
        (copies / upload.object_name).parent.mkdir(parents=True, exist_ok=True)
        if upload.path:
            shutil.copyfile(upload.path, copies / upload.object_name)
        else:
            (copies / upload.object_name).write_text(upload.content or "")
    gcs.upload(copies / "data", "data")
    handed = {k: v for k, v in local.pipeline.to_mapping().items() if k in user}
    settings = {
        **TINY_SETTINGS,
        "steps": STEPS,
        "checkpointPeriod": STEPS,
        "evalInterval": STEPS,
        "evalSteps": 1,
        **handed,
    }
    config.write_text(json.dumps(settings))
    return run_workload(maxtext_python, config, work, out, "--until", "train"), handed, work


def test_maxtext_trains_on_the_copy_and_measures_the_held_out_share(trained_on_jsonl):
    run, _, _ = trained_on_jsonl
    summary = run.summary
    assert run.returncode == 0 and summary["ok"], f"{summary}\n{run.stderr[-3000:]}"
    assert summary["final_step"] == STEPS
    assert [step for step, _ in summary["eval_curve"]] == [0, STEPS]  # held-out loss before and after training
    assert summary["trained_checkpoint"].endswith(f"/{STEPS}/model_params")


def test_the_trainer_read_the_bucket_not_the_tiny_dataset(trained_on_jsonl):
    run, handed, work = trained_on_jsonl
    assert all(handed[k].startswith("gs://") for k in ("dataset", "evalData", "chatTemplate"))
    (log,) = [path for path in run.summary["logs"] if "/train-" in path]
    with open(log) as f:
        argv = f.readline().split()  # the runner's first line: the command it ran (workload/launch/proc.py)
    assert "hf_path=json" in argv
    assert f"hf_train_files={handed['dataset']}" in argv and f"hf_eval_files={handed['evalData']}" in argv
    placed = work / "chat-template.jinja"
    assert f"chat_template_path={placed}" in argv and placed.read_text() == CHAT_TEMPLATE
