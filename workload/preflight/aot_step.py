"""Compile the SFT trainer's own training step for a TPU topology on a machine without a TPU (libtpu's
compile-only topology), and read back what the compiler says of it: memory per chip, FLOPs, or its OOM.

Runs in .maxtext-venv. Why not MaxText's `train_compile`: it compiles pre-training's `train.train_step`, while
`train_sft` runs MaxText 0.2.3's `MaxTextPeftTrainer` (train_sft.py 74-145: Tunix's PeftTrainer with MaxText's own
train step, `jax.value_and_grad` over the parameters split from the rest of the model) inside Tunix's loop
(google-tunix 0.1.7, the one workload/maxtext-requirements.txt pins for the VM too), which jits it under
`nnx.jit` (tunix/sft/peft_trainer.py 419-423, the model donated as well by workload/launch/model_donation.py), and
that step needs other memory:
- the optimizer is wrapped in `optax.MultiSteps` whenever `gradient_accumulation_steps` is set (212-215), which
  train_sft always does (train_sft.py 182): one more copy of the gradients in the optimizer state;
- the step returns MaxText's loss aux; its `intermediate_outputs` hold the logits (batch x sequence x
  vocabulary, float32: 2 GiB a chip for gemma3-4b at batch 1, 2048 tokens), which the trainer's launcher drops
  (workload/launch/unread_logits.py), and so does this step.
So this compiles that step: MaxText's trainer class, Tunix's jit, the train step with MaxText's loss
(train_sft.use_maxtext_loss_function), on abstract arrays sharded as `from_pretrained` shards the model
(model_creation_utils.py 737-773), and, when the run evaluates, Tunix's eval step (361-370, jitted at 424) with
the same loss. Only the mesh is train_compile's: the topology's compile-only devices. What the loop holds beside
the steps is counted from their memory (workload/preflight/fit.py `Live`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import jax
import optax
from flax import linen as nn
from flax import nnx
from flax.linen import partitioning as nn_partitioning
from maxtext.common.common_types import MODEL_MODE_TRAIN
from maxtext.configs import pyconfig
from maxtext.optimizers import optimizers
from maxtext.trainers.post_train.sft import train_sft
from maxtext.trainers.pre_train import train_compile
from maxtext.utils import lora_utils, maxtext_utils, maxtext_utils_nnx, model_creation_utils, sharding
from tunix.sft import peft_trainer
from tunix.sft import utils as tunix_utils

from workload.launch import model_donation, quantised_base, unread_logits
from workload.preflight import compiled
from workload.preflight.compiled import CompiledStep
from workload.preflight.fit import Live, Memory

HbmOom = compiled.HbmOom  # what compile_step raises when the compiler refuses the step


class _StepOnly(train_sft.MaxTextPeftTrainer):
    """train_sft's trainer with only what its train step reads (train_sft.py 90-93, 107; the model for its graph's
    structure): Tunix's __init__ would also build the optimizer state on this machine's memory, a checkpoint
    manager and loggers."""

    def __init__(self, model: nnx.Module) -> None:  # noqa: B027 — PeftTrainer.__init__ is skipped on purpose
        self.model = model
        self._lora_enabled = tunix_utils.is_lora_enabled(model)  # as PeftTrainer.__init__ sets it (line 211)
        self._has_aux = False  # with_loss_fn sets it, as train_sft's use_maxtext_loss_function calls it
        self.gen_model_input_fn = lambda x: x


def _optimizer(config: Any, model: nnx.Module) -> nnx.Optimizer:
    """train_sft's optimizer (train_sft.py 150-158) as PeftTrainer wraps it (peft_trainer.py 212-219)."""
    tx = optimizers.get_optimizer(config, maxtext_utils.create_learning_rate_schedule(config), model)
    if config.gradient_clipping_threshold > 0:
        tx = optax.chain(optax.clip_by_global_norm(max_norm=config.gradient_clipping_threshold), tx)
    tx = optax.MultiSteps(tx, config.gradient_accumulation_steps)
    return nnx.Optimizer(model, tx, wrt=nnx.LoRAParam if config.lora.enable_lora else nnx.Param)


def _model_and_optimizer(config: Any, mesh: Any) -> tuple[nnx.Module, nnx.Optimizer]:
    """The model as the config initialises it (its seed), with LoRA where the config asks for it (train_sft.py
    245-246, qwix's dummy call here on abstract arrays), and train_sft's optimizer over what it trains."""
    rngs = maxtext_utils_nnx.create_nnx_rngs(config, model_mode=MODEL_MODE_TRAIN)
    model = model_creation_utils.from_config(config, mesh=mesh, rngs=rngs, model_mode=MODEL_MODE_TRAIN)
    if config.lora.enable_lora:
        model = _replicated_lora(lora_utils.apply_lora_to_model(model, None, config))
    return model, _optimizer(config, model)


def _replicated_lora(model: nnx.Module) -> nnx.Module:
    """The adapters replicated on every chip, as apply_lora_to_model places them given a mesh (lora_utils.py
    544-552), which it cannot do here: its `jax.set_mesh` refuses to run under `nnx.eval_shape`."""
    graphdef, state = nnx.split(model)
    state = jax.tree.map(
        lambda x: (
            x.replace(sharding=jax.sharding.PartitionSpec(), out_sharding=None, sharding_names=None)
            if isinstance(x, nnx.LoRAParam)
            else x
        ),
        state,
        is_leaf=lambda x: isinstance(x, nnx.Variable),
    )
    return nnx.merge(graphdef, state)


def _abstract_model_and_optimizer(config: Any, mesh: Any) -> tuple[nnx.Module, nnx.Optimizer]:
    """Shapes, dtypes and shardings only, sharded as `from_pretrained` shards the model's state (the optimizer's
    state carries its parameters' sharding metadata: flax's `to_opt_state`)."""

    def build() -> tuple[nnx.Module, nnx.Optimizer]:
        return _model_and_optimizer(config, mesh)

    with nn.logical_axis_rules(config.logical_axis_rules):
        graphdef, abstract = nnx.split(nnx.eval_shape(build))
        shardings = nn.logical_to_mesh_sharding(nnx.get_partition_spec(abstract), mesh)
        sharded = jax.jit(lambda: nnx.split(build())[1], out_shardings=shardings).eval_shape()
    return nnx.merge(graphdef, sharded)


def _abstract_batch(config: Any, mesh: Any, sequences: int) -> dict[str, jax.ShapeDtypeStruct]:
    """What SFTDataHooks hands a step: the six arrays MaxText's loss takes, `sequences` of them, placed with the
    input data sharding (DataLoader.load_next_batch), so that Tunix's `_shard_input` leaves them as they are."""
    placed = sharding.get_input_data_sharding(config, mesh)
    shaped = maxtext_utils.get_shaped_batch(config)
    return {
        key: jax.ShapeDtypeStruct((sequences, *value.shape[1:]), value.dtype, sharding=placed)
        for key, value in shaped.items()
    }


def _jitted_train_step(trainer: peft_trainer.PeftTrainer) -> Any:
    """The trainer's step jitted as jit_train_and_eval_step jits it (peft_trainer.py 421-423), which then binds the
    trainer's own model and optimizer to it: here they are arguments, given to `lower` or to the call."""
    return nnx.jit(trainer.create_train_step_fn(), donate_argnames=model_donation.DONATED)


def _default(dataclass: type, name: str) -> Any:
    [field] = [f for f in dataclasses.fields(dataclass) if f.name == name]
    return field.default


def _trainer(config: Any, model: nnx.Module) -> peft_trainer.PeftTrainer:
    """train_sft's trainer with its loss, one function for its train and eval steps (with_loss_fn), without the
    logits, as the trainer's launcher has every trainer."""
    trainer = train_sft.use_maxtext_loss_function(_StepOnly(model), config)
    trainer.loss_fn = trainer.eval_loss_fn = unread_logits.without_logits(trainer.loss_fn)
    return trainer


def _compiled(config: Any, mesh: Any, evaluate: bool) -> tuple[Any, Live]:
    """(the train step compiled, what one chip holds). The eval step is compiled only when the run evaluates
    (`evaluate`) and then with MaxText's eval batch: only its memory is read."""
    in_flight = _default(peft_trainer.TrainingConfig, "max_inflight_computations")  # train_sft leaves it
    with jax.set_mesh(mesh), nn_partitioning.axis_rules(config.logical_axis_rules):  # as train_sft.train_model runs it
        model, optimizer = _abstract_model_and_optimizer(config, mesh)
        trainer = _trainer(config, model)
        batch = _abstract_batch(config, mesh, config.global_batch_size_to_load)
        train = _jitted_train_step(trainer).lower(model, optimizer, batch).compile()
        eval_batch = _abstract_batch(config, mesh, config.global_batch_size_to_load_eval)
        evaluated = nnx.jit(trainer.create_eval_step_fn()).lower(model, eval_batch).compile() if evaluate else None
    live = Live(
        train=compiled.memory(train),
        eval=None if evaluated is None else compiled.memory(evaluated),
        batch=compiled.bytes_per_chip(batch),
        eval_batch=compiled.bytes_per_chip(eval_batch),
        in_flight=in_flight,
        frozen=_frozen_bytes(model) if config.lora.enable_lora else 0,
    )
    return train, live


def _frozen_bytes(model: nnx.Module) -> int:
    """One chip's share of the weights LoRA leaves frozen: every parameter but the adapters (LoRAParam is a Param)."""
    return compiled.bytes_per_chip(nnx.state(model, nnx.All(nnx.Param, nnx.Not(nnx.LoRAParam))))


def local_step_memory(argv: list[str]) -> Memory:
    """The same step compiled for this machine's own devices (train_sft's mesh, no topology): what
    bench/preflight_fidelity.py sets beside a real train_sft process's memory."""
    config = maxtext_config(argv)
    with _quantised_as_asked(argv):
        _, live = _compiled(config, maxtext_utils.get_mesh_from_config(config), evaluate=False)
    return live.train


def maxtext_config(argv: list[str]) -> Any:
    """MaxText's config as train_sft parses it (0.2.3's main: `initialize_pydantic`, MaxText's own config type). A
    QLoRA run's key is taken out, as the trainer's launcher takes it (workload/launch/quantised_base.py); the step is
    compiled under that launcher's patches (`_quantised_as_asked`), on frozen weights quantised as in training."""
    argv, _ = quantised_base.take(argv)
    config = pyconfig.initialize_pydantic(argv)
    compiled.no_compilation_cache()
    return config


def _quantised_as_asked(argv: list[str]) -> Any:
    """The trainer launcher's QLoRA patches while the step is built and compiled, where `argv` carries the key."""
    return quantised_base.quantising(quantised_base.take(argv)[1])


def compile_step(argv: list[str]) -> CompiledStep:
    """`argv`: train_sft's MaxText arguments plus `compile_topology=…`, after a program name whose path makes
    pyconfig pick train_sft's own default config (post_train/sft.yml), as `python -m` does."""
    config = maxtext_config(argv)
    mesh = train_compile.get_topology_mesh(config)
    with _quantised_as_asked(argv):
        return compiled.compile_step(config, mesh, lambda: _compiled(config, mesh, evaluate=config.eval_interval > 0))
