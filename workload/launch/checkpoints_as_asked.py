"""No checkpoint where the run asks for none (`enable_checkpointing=False`).

MaxText 0.2.3's train_sft hands Tunix `checkpoint_root_directory=mt_config.checkpoint_dir` whatever
`enable_checkpointing` says (trainers/post_train/sft/train_sft.py `get_tunix_config`), and Tunix's trainer makes a
checkpoint manager whenever it has a directory, and saves (a final one at the last step): on a TPU v5e chip a run
without checkpoints wrote ~10 GB of model and optimizer state (../shared/tpu/README.md). Tunix makes no manager
without a directory (tunix/sft/checkpoint_manager.py), so its trainer is given none when the run asks for none.

train_sft runs as `__main__` (the trainer's launcher runs it with runpy), a module of its own that nothing here can
reach: the patch is where train_sft meets shared modules. MaxText's config is noted as pyconfig builds it (0.2.3's
`main` calls `initialize_pydantic`, 0.2.2's called `initialize`), and Tunix's trainer, which 0.2.3 subclasses as
`MaxTextPeftTrainer` without its own `__init__`, is built without a directory when that config asked for none.

Runs in the MaxText venv: the trainer's launcher applies it (workload/launch/trainer_launcher.py).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any

from workload.launch import pinned_code

PATCH = "workload/launch/checkpoints_as_asked.py"
# sha256 of the sources this patch was written for (workload/launch/pinned_code.py): maxtext 0.2.3's
# train_sft.get_tunix_config, which passes the directory (0.2.2's too; 0.2.3 adds `data_sharding_axis`), its
# train_sft.main, which builds the config with `pyconfig.initialize_pydantic`, and google-tunix 0.1.7's
# PeftTrainer.__init__, which takes the training config as its third argument.
MAXTEXT_GET_TUNIX_CONFIG_SHA256 = "b50973db36c64cf96cf1c8542b036b466bdee56f754e0264e03177271e289680"
MAXTEXT_MAIN_SHA256 = "7c0799f049212f62b3989847750bbc221f5ac7ceffbb7e294399eea0ee59bbca"
TUNIX_TRAINER_INIT_SHA256 = "37c32b59f1890c8553e6adfa6729c4a66775d8b3956fe4b8e702391de8ef98f1"

_asked = {"checkpoints": True}  # MaxText's enable_checkpointing, as the last config pyconfig built says


def patch() -> None:
    from maxtext.configs import pyconfig
    from maxtext.trainers.post_train.sft import train_sft
    from tunix.sft import peft_trainer

    pinned_code.check(train_sft, "get_tunix_config", "maxtext", MAXTEXT_GET_TUNIX_CONFIG_SHA256, PATCH)
    pinned_code.check(train_sft, "main", "maxtext", MAXTEXT_MAIN_SHA256, PATCH)
    pinned_code.check(peft_trainer, "PeftTrainer.__init__", "google-tunix", TUNIX_TRAINER_INIT_SHA256, PATCH)
    initialize = pyconfig.initialize_pydantic

    @functools.wraps(initialize)
    def initialize_noting_checkpoints(*args: Any, **kwargs: Any) -> Any:
        config = initialize(*args, **kwargs)
        _asked["checkpoints"] = bool(config.enable_checkpointing)
        return config

    trainer_init = peft_trainer.PeftTrainer.__init__

    @functools.wraps(trainer_init)
    def init_as_asked(self: Any, model: Any, optimizer: Any, training_config: Any, *args: Any, **kwargs: Any) -> None:
        if not _asked["checkpoints"]:
            training_config = dataclasses.replace(training_config, checkpoint_root_directory=None)
        trainer_init(self, model, optimizer, training_config, *args, **kwargs)

    pyconfig.initialize_pydantic = initialize_noting_checkpoints
    peft_trainer.PeftTrainer.__init__ = init_as_asked
