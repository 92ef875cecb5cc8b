"""Run by the MaxText venv's Python: Tunix's train step on the tiny model, as the trainer's launcher leaves it
(workload/launch/unread_logits.py) and as MaxText's own loss has it, from the same initial state and batch. Prints JSON
per variant: each step's loss and gradient norm (as float hex: bitwise), a digest of the weights after the steps,
and the compiled step's output bytes. `python logits_step.py ARG ...`, ARG as workload/run/commands.py gives them
to train_sft."""

from __future__ import annotations

import hashlib
import json
import sys

import jax
import numpy as np
from flax import nnx
from flax.linen import partitioning as nn_partitioning
from maxtext.trainers.post_train.sft import train_sft
from maxtext.utils import maxtext_utils

from workload.preflight import __main__ as preflight
from workload.preflight import aot_step

STEPS = 3  # the first update has a learning rate of 0 (the warm-up starts there): three show training


def batch(config) -> dict[str, jax.Array]:
    """A fixed batch of the step's six arrays: token ids drawn once with a fixed seed, every position weighted."""
    shaped = maxtext_utils.get_shaped_batch(config)
    rng = np.random.default_rng(0)
    tokens = rng.integers(0, config.vocab_size, size=shaped["inputs"].shape, dtype=np.int32)
    positions = np.broadcast_to(np.arange(tokens.shape[1], dtype=np.int32), tokens.shape)
    segments = np.ones_like(tokens)
    arrays = {
        "inputs": tokens,
        "inputs_position": positions,
        "inputs_segmentation": segments,
        "targets": np.roll(tokens, -1, axis=1),
        "targets_position": positions,
        "targets_segmentation": segments,
    }
    return {key: jax.numpy.asarray(value, dtype=shaped[key].dtype) for key, value in arrays.items()}


def variant(config, mesh, drop: bool) -> dict:
    with jax.set_mesh(mesh), nn_partitioning.axis_rules(config.logical_axis_rules):
        model, optimizer = aot_step._model_and_optimizer(config, mesh)  # the config's seed: the same start
        # dropped: the preflight's trainer, as the launcher leaves every trainer; kept: train_sft's own loss
        kept = train_sft.use_maxtext_loss_function(aot_step._StepOnly(model), config)
        step = aot_step._jitted_train_step(aot_step._trainer(config, model) if drop else kept)
        data = batch(config)
        compiled = step.lower(model, optimizer, data).compile()  # run as compiled: one compile a variant
        output_bytes = compiled.memory_analysis().output_size_in_bytes
        losses, norms = [], []
        for _ in range(STEPS):
            loss, aux, norm = compiled(model, optimizer, data)
            losses.append(float(loss).hex())
            norms.append(float(norm).hex())
        weights = hashlib.sha256()
        for leaf in jax.tree_util.tree_leaves(nnx.state(model, nnx.Param)):
            weights.update(np.asarray(leaf).tobytes())
    return {
        "losses": losses,
        "grad_norms": norms,
        "weights_sha256": weights.hexdigest(),
        "aux_keys": sorted(aux),
        "output_bytes": int(output_bytes),
        "logits_bytes": int(np.prod(data["inputs"].shape)) * config.vocab_size * 4,
    }


def main() -> None:
    config = aot_step.maxtext_config([preflight.train_sft_file(), *sys.argv[1:]])
    mesh = maxtext_utils.get_mesh_from_config(config)
    print(json.dumps({"kept": variant(config, mesh, drop=False), "dropped": variant(config, mesh, drop=True)}))


if __name__ == "__main__":
    main()
