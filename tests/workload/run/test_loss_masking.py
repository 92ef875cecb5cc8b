"""Issue 25's masking check: the fine-tune's loss falls on the assistant's tokens only. MaxText's SFT has gone wrong
here before (maxtext#736, PR #3284), and in 0.2.3 it rests on a default that one changed command line loses:
`sft_train_on_completion_only` is True only in configs/post_train/sft.yml, which pyconfig picks for train_sft from
the program's path, while base.yml says False (the code path: tests/workload/run/sft_batch.py). So this builds, with
MaxText's own input pipeline and the tiny profile's exact train arguments, the first batch the trainer trains on,
and reads which words carry loss weight. The tiny dataset's user turns and assistant turns use different words
(workload/tiny/assets.py `conversations`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.workload.tiny_run import REPO
from workload.core.config import PipelineConfig
from workload.run import commands
from workload.run.layout import Layout

USER_WORDS = ("Tell me something about", "Thanks. And what about")
ASSISTANT_WORDS = ("Here is fact", "In winter")


@pytest.fixture(scope="module")
def first_batches(maxtext_python, tiny_converted, tmp_path_factory) -> list[dict]:
    work = tmp_path_factory.mktemp("masking")
    config = PipelineConfig(profile="tiny", trainer="tunix")  # the data pipeline as Tunix's train_sft reads it
    layout = Layout(str(work), str(work / "out"), config.model, commands.run_name(config))
    Path(layout.tiny_dir).symlink_to(tiny_converted / "tiny")  # the tiny model and dataset, read only
    train = commands.train_sft(config, layout)
    assert train.argv[3] == commands.TRAIN_SFT  # run as under `python -m`: MaxText infers sft.yml from its path
    arguments = train.argv[4:]
    variants = [[], ["sft_train_on_completion_only=False"]]
    done = subprocess.run(
        [maxtext_python, str(REPO / "tests" / "workload" / "run" / "sft_batch.py"), json.dumps(variants), *arguments],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def test_the_trainer_weighs_the_assistants_words_and_none_of_the_users(first_batches):
    batch = first_batches[0]
    assert batch["sft_train_on_completion_only"] is True
    assert all(words in batch["weighted"] for words in ASSISTANT_WORDS)
    assert not any(words in batch["weighted"] for words in USER_WORDS)
    assert all(words in batch["inputs"] for words in USER_WORDS + ASSISTANT_WORDS)  # the model reads both


def test_without_sft_yml_default_the_users_words_would_carry_loss(first_batches):
    """What the check above would see if the setting were lost: base.yml's default."""
    batch = first_batches[1]
    assert batch["sft_train_on_completion_only"] is False
    assert all(words in batch["weighted"] for words in USER_WORDS + ASSISTANT_WORDS)
