"""Run by the MaxText venv's Python: the checkpoint directory a Tunix trainer is built with, after MaxText's pyconfig
parsed train_sft's arguments with `enable_checkpointing` false, without the launcher's patch
(workload/launch/checkpoints_as_asked.py), then false and true with it. Prints JSON {"unpatched": {"false": …},
"patched": {"false": …, "true": …}}, each the directory or null: `python checkpoints_asked.py TRAIN_SFT_FILE DIR`."""

import json
import sys

import optax
from flax import nnx
from maxtext.configs import pyconfig
from maxtext.trainers.post_train.sft import train_sft

from workload.launch import checkpoints_as_asked


def trainer_directory(argv: list[str]) -> str | None:
    config = pyconfig.initialize_pydantic(argv)  # as train_sft's main parses its arguments
    model = nnx.Linear(2, 2, rngs=nnx.Rngs(0))
    # train_sft's own way from its config to its trainer (setup_trainer_state)
    trainer = train_sft.MaxTextPeftTrainer(model, optax.sgd(0.1), train_sft.get_tunix_config(config))
    return trainer.config.checkpoint_root_directory


def main(program: str, output: str) -> None:
    def argv(enable: str) -> list[str]:
        return [program, f"base_output_directory={output}", "run_name=asked", f"enable_checkpointing={enable}",
                "model_name=gemma3-4b", "hardware=cpu", "skip_jax_distributed_system=true"]  # fmt: skip

    found = {"unpatched": {"false": trainer_directory(argv("false"))}}  # what the patch mends
    checkpoints_as_asked.patch()
    found["patched"] = {enable: trainer_directory(argv(enable)) for enable in ("false", "true")}
    print(json.dumps(found))


if __name__ == "__main__":
    main(*sys.argv[1:])
