"""Tunix's train step given the model's buffers as well as the optimizer's, so that a chip never holds the weights
twice.

Tunix 0.1.7 jits its train step with `donate_argnames=("optimizer",)` (`PeftTrainer.jit_train_and_eval_step`,
tunix/sft/peft_trainer.py 419-423). The model is an argument and, through `nnx.jit`, an output too: JAX forwards
no unchanged input to an output at the top level, so XLA writes every weight into a new buffer each step while the
old one lives. With LoRA the frozen weights are returned unchanged and still copied: 7.2 GB for gemma3-4b in bf16.
Donating the model lets XLA write its outputs over the inputs' buffers (aliasing): the weights are held once.

Safe because nothing else holds the model's arrays across a step: `nnx.jit` writes the outputs back into the
model's variables as the call returns, Tunix's eval step and checkpoints read them through the model afterwards,
and Orbax copies a checkpoint's arrays to the host before its save returns. MaxText's own loop donates its whole
state the same way (`train_utils.jit_train_step`).

Runs in the MaxText venv: the trainer's launcher applies it to Tunix's loop, and the preflight's compiled step
(workload/preflight/aot_step.py) jits with the same `DONATED`.
"""

from __future__ import annotations

import functools
from typing import Any

from workload.launch import pinned_code

DONATED = ("model", "optimizer")  # the train step's arguments whose buffers its outputs may take

# sha256 of tunix 0.1.7's PeftTrainer.jit_train_and_eval_step source (workload/launch/pinned_code.py).
TUNIX_JIT_STEPS_SHA256 = "5208cb2237d70b863de3c68e6a13bfd6bf5dc3eb671eb23a32c1fdfb7255bef2"


def jit_train_and_eval_step(self: Any, skip_jit: bool = False, cache_nnx_graph: bool = False) -> tuple[Any, Any]:
    """PeftTrainer.jit_train_and_eval_step's job (peft_trainer.py 400-438), the model donated as well."""
    from flax import nnx
    from jax.interpreters import pxla

    train_step = self.create_train_step_fn()
    eval_step = self.create_eval_step_fn()
    if skip_jit:
        return train_step, eval_step
    if self._jitted_train_step_fn is None:
        self._shard_optimizer(pxla.thread_resources.env.physical_mesh)

        def bound(f: Any, *args: Any) -> Any:
            return functools.partial(nnx.cached_partial(f, *args)) if cache_nnx_graph else functools.partial(f, *args)

        self._jitted_train_step_fn = bound(nnx.jit(train_step, donate_argnames=DONATED), self.model, self.optimizer)
        self._jitted_eval_step_fn = bound(nnx.jit(eval_step), self.model)
    return self._jitted_train_step_fn, self._jitted_eval_step_fn


def patch_tunix() -> None:
    """Every PeftTrainer jits its train step with the model donated; only Tunix's pinned code is patched."""
    from tunix.sft import peft_trainer

    pinned_code.check(
        peft_trainer,
        "PeftTrainer.jit_train_and_eval_step",
        "google-tunix",
        TUNIX_JIT_STEPS_SHA256,
        "workload/launch/model_donation.py",
    )
    peft_trainer.PeftTrainer.jit_train_and_eval_step = jit_train_and_eval_step
