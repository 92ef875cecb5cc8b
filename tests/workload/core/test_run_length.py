"""The run's length is tokens (or epochs, or for the tiny profile a step count): the default is the seed's tokens per
chip, a larger batch trains the same tokens in fewer steps, the run is named by the steps they come to, and
MaxText's learning-rate schedule, set in steps, follows the tokens (workload/core/run_length.py)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from workload.core.config import ConfigError, PipelineConfig
from workload.run.commands import run_name, train_sft
from workload.run.layout import Layout

# MaxText's own defaults, in the MaxText venv beside its Python (.maxtext-venv/bin/python).
BASE_YML = "lib/python3.12/site-packages/maxtext/configs/base.yml"


def steps(**given: object) -> int:
    return PipelineConfig.from_mapping(given).steps


def test_no_length_is_the_seeds_tokens_per_chip_on_the_stacks_accelerator():
    # The seed: 1,000 steps of 1 x 2,048 on each of a v6e-8's chips, 250 at the default batch of 4; twice the chips,
    # twice the tokens.
    assert PipelineConfig().tokens_per_step == 4 * 8 * 2048 and steps() == 250
    assert steps(perDeviceBatchSize=1) == 1000  # the seed's own batch: its 1,000 steps
    assert steps(acceleratorType="v6e-16") == 250 and steps(acceleratorType="v6e-1") == 250
    assert steps(tokens=1000 * 8 * 2048, perDeviceBatchSize=1) == 1000
    assert steps(profile="tiny") == 1000  # of its 128-position sequences at its batch of 1: the seed's 1,000 steps


def test_a_larger_batch_trains_the_same_tokens_in_fewer_steps_a_partial_last_step_whole():
    assert steps(perDeviceBatchSize=2) == 500 and steps(perDeviceBatchSize=4) == 250
    assert steps(perDeviceBatchSize=3) == 334  # 333 1/3 steps: the run trains at least the tokens asked
    assert steps(maxTargetLength=1024) == 500  # shorter sequences, more of them
    assert steps(tokens=1) == 1


def test_a_step_count_is_the_steps_whatever_the_batch():
    assert steps(steps=20, perDeviceBatchSize=4) == 20


@pytest.mark.parametrize(
    ("given", "named", "other"),
    [
        ({"tokens": 100, "steps": 3}, "steps", "tokens"),
        ({"tokens": 100, "epochs": 1}, "epochs", "tokens"),
        ({"epochs": "2", "steps": 3}, "steps", "epochs"),
    ],
)
def test_two_forms_of_the_length_are_refused_in_one_line(given, named, other):
    with pytest.raises(ConfigError) as raised:
        PipelineConfig.from_mapping(given)
    assert str(raised.value) == (
        f"tpu-sft:{named}: is set and so is tpu-sft:{other}: one of them gives the run's length. "
        f"Fix: pulumi config rm tpu-sft:{named}, or pulumi config rm tpu-sft:{other}"
    )


def test_epochs_not_yet_counted_in_the_datas_tokens_have_no_steps():
    config = PipelineConfig.from_mapping({"epochs": "1.5"})
    with pytest.raises(ConfigError, match=r"^tpu-sft:epochs: counts passes over the training data, .*tpu-sft:tokens"):
        _ = config.steps


def test_the_run_is_named_by_the_steps_however_the_length_was_given():
    """The same steps at the same batch train the same weights: tokens that come to 500 steps name the run that
    `steps 500` names, and another length another run."""
    at_batch_2 = {"perDeviceBatchSize": 2}
    by_tokens = PipelineConfig.from_mapping({**at_batch_2, "tokens": 500 * 2 * 8 * 2048})
    by_steps = PipelineConfig.from_mapping({**at_batch_2, "steps": 500})
    assert by_tokens.steps == 500 and run_name(by_tokens) == run_name(by_steps)
    assert run_name(PipelineConfig.from_mapping(at_batch_2)) == run_name(by_steps)  # the default, the same tokens
    assert run_name(PipelineConfig.from_mapping({**at_batch_2, "steps": 501})) != run_name(by_steps)


def test_the_learning_rate_schedule_follows_the_tokens_not_the_steps(maxtext_python):
    """MaxText sets its schedule in steps: warm-up over a fraction of `learning_rate_schedule_steps`, which is
    `steps` unless set (base.yml -1). tpu-sft sets neither, so at any batch the warm-up and the decay cover the same
    share of the run's tokens."""
    base = yaml.safe_load((Path(maxtext_python).parents[1] / BASE_YML).read_text())
    assert base["learning_rate_schedule_steps"] == -1 and base["warmup_steps_fraction"] == 0.1
    for batch in (1, 2, 4):
        config = PipelineConfig.from_mapping({"perDeviceBatchSize": batch})
        argv = train_sft(config, Layout("/w", "/data/out", config.model, "run")).argv
        assert not [a for a in argv if a.split("=")[0] in {"learning_rate_schedule_steps", "warmup_steps_fraction"}]
        assert f"steps={config.steps}" in argv
        warmup_steps = int(config.steps * base["warmup_steps_fraction"])  # maxtext_utils.create_learning_rate_schedule
        assert warmup_steps * config.tokens_per_step == 100 * 8 * 2048  # the seed's first tenth, in tokens
