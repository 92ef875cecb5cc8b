"""Compile MaxText's own SFT loop's training step (tpu-sft:trainer native) for a TPU topology on a machine without a
TPU, with MaxText's own ahead-of-time compile, `train_compile`, and read back what the compiler says of it.

Runs in .maxtext-venv. The loop (maxtext/trainers/post_train/sft/train_sft_native.py; train_sft_deprecated.py in
0.2.2) runs pre-training's linen `train.train_step`, the step `train_compile` compiles, so this is
train_compile's own code (`get_topology_mesh`, `get_shaped_inputs`, `jit_and_compile`) set up as the loop sets its
step up:
- pyconfig parses the arguments with `use_tunix_gradient_accumulation=False` (its `main`), and JAX's PRNG is
  `unsafe_rbg` (both mains), which shapes the step's random key;
- the state's shardings pass through `maybe_update_params_sharding_with_opt`, and the step is jitted with the
  parameters' shardings (`train_utils.jit_train_step`), the state donated;
- when the run evaluates, `train.eval_step` is jitted as `train_utils.jit_eval_step` jits it, on the eval batch
  (`global_batch_size_to_load_eval` sequences), the state not donated.
What the loop holds beside the steps is counted from their memory (workload/preflight/fit.py `Live`).
"""

from __future__ import annotations

import os
from typing import Any

import jax
from flax.linen import partitioning as nn_partitioning
from maxtext.configs import pyconfig
from maxtext.trainers.pre_train import train, train_compile
from maxtext.utils import maxtext_utils, sharding

from workload.core.accelerators import CHIP_MARGINS
from workload.preflight import compiled
from workload.preflight.compiled import CompiledStep
from workload.preflight.fit import Live

# The loop's metric logger reads the step before as it queues the next (MetricLogger.buffer_and_write_train_metrics),
# so one step runs ahead of the one on the chip, with its batch already placed (DataLoader.load_next_batch).
IN_FLIGHT = 1
# Both mains add it to libtpu's flags before JAX starts.
_RNG_FLAG = "--xla_tpu_spmd_rng_bit_generator_unsafe=true"

HbmOom = compiled.HbmOom  # what compile_step raises when the compiler refuses the step


def maxtext_config(argv: list[str]) -> Any:
    """MaxText's config as the loop's `main` parses it, with its process settings."""
    jax.config.update("jax_default_prng_impl", "unsafe_rbg")
    flags = os.environ.get("LIBTPU_INIT_ARGS", "")
    if _RNG_FLAG not in flags:
        os.environ["LIBTPU_INIT_ARGS"] = f"{flags} {_RNG_FLAG}".strip()
    config = pyconfig.initialize(argv, use_tunix_gradient_accumulation=False)
    jax.config.update("jax_use_shardy_partitioner", config.shardy)
    compiled.no_compilation_cache()
    return config


def _compile(function: Any, arguments: tuple, mesh: Any, signature: tuple, config: Any) -> Any:
    _, in_shardings, out_shardings, static_argnums, donate_argnums = signature
    rules = nn_partitioning.axis_rules(config.logical_axis_rules)
    return train_compile.jit_and_compile(
        function, arguments, {}, mesh, in_shardings, out_shardings, static_argnums, donate_argnums, config, rules
    )


def _eval_batch(config: Any, batch: dict[str, jax.ShapeDtypeStruct]) -> dict[str, jax.ShapeDtypeStruct]:
    return {
        key: jax.ShapeDtypeStruct((config.global_batch_size_to_load_eval, *value.shape[1:]), value.dtype)
        for key, value in batch.items()
    }


def _placed(arrays: dict[str, jax.ShapeDtypeStruct], placement: Any) -> dict[str, jax.ShapeDtypeStruct]:
    return {key: jax.ShapeDtypeStruct(a.shape, a.dtype, sharding=placement) for key, a in arrays.items()}


def _compiled(config: Any, mesh: Any, evaluate: bool) -> tuple[Any, Live]:
    """(the train step compiled, what one chip holds)."""
    (state, batch, rng), _, state_shardings, _, model = train_compile.get_shaped_inputs(mesh, config)
    params_shardings, state_shardings = sharding.maybe_update_params_sharding_with_opt(config, state_shardings)
    data_sharding = sharding.get_input_data_sharding(config, mesh)
    signature = maxtext_utils.get_functional_train_with_signature(
        train.train_step, data_sharding, state_shardings, model, config, params_shardings
    )
    train_step = _compile(signature[0], (state, batch, rng), mesh, signature, config)
    eval_batch = _eval_batch(config, batch)
    evaluated = None
    if evaluate:
        eval_signature = maxtext_utils.get_functional_eval_with_signature(
            train.eval_step, data_sharding, state_shardings, model, config
        )
        evaluated = _compile(eval_signature[0], (state, eval_batch, rng), mesh, eval_signature, config)
    live = Live(
        train=compiled.memory(train_step),
        eval=None if evaluated is None else compiled.memory(evaluated),
        batch=compiled.bytes_per_chip(_placed(batch, data_sharding)),
        eval_batch=compiled.bytes_per_chip(_placed(eval_batch, data_sharding)),
        in_flight=IN_FLIGHT,
        resume_keeps_a_copy=False,
        margin=CHIP_MARGINS["native"],
    )
    return train_step, live


def compile_step(argv: list[str]) -> CompiledStep:
    """`argv`: the loop's MaxText arguments plus `compile_topology=…`, after a program name whose path makes pyconfig
    pick the loop's default config (post_train/sft.yml), as `python -m` does."""
    config = maxtext_config(argv)
    mesh = train_compile.get_topology_mesh(config)
    return compiled.compile_step(config, mesh, lambda: _compiled(config, mesh, evaluate=config.eval_interval > 0))
