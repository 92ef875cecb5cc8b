"""The first batch MaxText 0.2.3's SFT trainer trains on, built by MaxText's own input pipeline from the trainer's
own arguments, as JSON lines: per variant, the text of its input tokens and of the target tokens that carry loss
weight. Runs in the MaxText venv: `python sft_batch.py VARIANTS_JSON ARG ...`, ARG as workload/run/commands.py
gives them to train_sft, each variant a list of arguments appended to them.

The path it exercises (tests/workload/run/test_loss_masking.py says why it matters): train_sft, started as a module,
has sys.argv[0] = its own file, from which pyconfig infers configs/post_train/sft.yml
(`sft_train_on_completion_only: True`; base.yml says False); `hf_data_processing.preprocessing_pipeline` then
masks every prompt turn's targets with the pad id (`input_pipeline_utils.SFTPromptMasking`), `ShiftData`
zeroes `targets_segmentation` wherever the target is the pad or BOS id, and the loss (`pre_train/train.py`
`loss_fn`, which train_sft uses) weighs each token by `targets_segmentation != 0`."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Sequence

import numpy as np
from absl import app
from jax.sharding import Mesh
from maxtext.configs import pyconfig
from maxtext.input_pipeline.input_pipeline_interface import create_data_iterator
from maxtext.utils import maxtext_utils
from transformers import AutoTokenizer

TRAIN_SFT = "maxtext.trainers.post_train.sft.train_sft"


def first_batch(argv: list[str]) -> dict[str, str | bool]:
    config = pyconfig.initialize(argv)
    mesh = Mesh(maxtext_utils.create_device_mesh(config), config.mesh_axes)
    train, _ = create_data_iterator(config, mesh)
    batch = {key: np.asarray(value) for key, value in next(train).items()}
    tokenizer = AutoTokenizer.from_pretrained(config.tokenizer_path)
    targets, weighted = batch["targets"], batch["targets_segmentation"] != 0
    return {
        "inputs": tokenizer.decode(batch["inputs"][batch["inputs_segmentation"] != 0]),
        "weighted": tokenizer.decode(targets[weighted]),
        "sft_train_on_completion_only": config.sft_train_on_completion_only,
    }


def main(argv: Sequence[str]) -> None:
    variants, args = json.loads(argv[1]), argv[2:]
    spec = importlib.util.find_spec(TRAIN_SFT)
    assert spec is not None and spec.origin is not None
    for extra in variants:  # argv[0] as `python -m` gives it: the module's own file
        print(json.dumps(first_batch([spec.origin, *args, *extra])), flush=True)


if __name__ == "__main__":
    # As train_sft starts: absl's app.run parses the flags first, which Grain's dataset reads (it raises
    # UnparsedFlagAccessError on --grain_enable_multiprocess_worker_profiling otherwise); MaxText's own
    # arguments are positional, so they reach main as given.
    app.run(main)
