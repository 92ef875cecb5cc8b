"""Run by the MaxText venv's Python (Tunix lives there): a real Tunix 0.1.7 PeftTrainer trains two steps of a small
model with LoRA on one of its two weights, with Tunix's own jit (`tunix`) or the launcher's (`patched`,
workload/launch/model_donation.py). Prints JSON: per trainer, whether the frozen weight's and the adapter's
buffers before the steps were given to the step (deleted after it), the bytes the compiled step aliases, the
model's bytes, the losses, and the weights after; and "guard", what the patch says to code it was not written for.
`python model_donation_live.py`."""

import os

os.environ["JAX_PLATFORMS"] = "cpu"

import json  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax import nnx  # noqa: E402
from tunix.sft import peft_trainer  # noqa: E402

from tests.workload.launch.patch_guard import refusals  # noqa: E402
from workload.launch import model_donation  # noqa: E402


class Model(nnx.Module):
    """A frozen weight (nnx.Param) and a trained adapter (nnx.LoRAParam): what a LoRA step is given."""

    def __init__(self) -> None:
        self.frozen = nnx.Param(jnp.asarray(np.random.default_rng(0).normal(size=(64, 256)), jnp.float32))
        self.adapter = nnx.LoRAParam(jnp.zeros((256, 8), jnp.float32))

    def __call__(self, x: jax.Array) -> jax.Array:
        return x @ self.frozen @ self.adapter


def loss_fn(model: Model, x: jax.Array, y: jax.Array) -> jax.Array:
    return jnp.mean((model(x) - y) ** 2)


def batches() -> list[dict[str, np.ndarray]]:
    rng = np.random.default_rng(1)
    return [{"x": rng.normal(size=(4, 64)).astype(np.float32), "y": rng.normal(size=(4, 8)).astype(np.float32)}] * 2


def trained(jit: str) -> dict:
    if jit == "patched":
        model_donation.patch_tunix()
    model = Model()
    frozen, adapter = model.frozen.value, model.adapter.value
    config = peft_trainer.TrainingConfig(eval_every_n_steps=100, max_steps=2)
    trainer = peft_trainer.PeftTrainer(model, optax.sgd(1e-3), config).with_loss_fn(loss_fn)
    trainer.train(batches())
    train_step = trainer.create_train_step_fn()
    donated = model_donation.DONATED if jit == "patched" else ("optimizer",)
    compiled = nnx.jit(train_step, donate_argnames=donated).lower(model, trainer.optimizer, batches()[0]).compile()
    return {
        "frozen_given": frozen.is_deleted(),
        "adapter_given": adapter.is_deleted(),
        "aliased_bytes": compiled.memory_analysis().alias_size_in_bytes,
        "model_bytes": int(frozen.nbytes + adapter.nbytes),
        "loss_after": float(loss_fn(model, **batches()[0])),
        "adapter_after": float(np.asarray(model.adapter.value).sum()),
        "frozen_unchanged": bool(np.array_equal(np.asarray(model.frozen.value), np.asarray(Model().frozen.value))),
    }


if __name__ == "__main__":
    # first: neither refusal may have patched Tunix
    guard = refusals(
        model_donation,
        "TUNIX_JIT_STEPS_SHA256",
        lambda: peft_trainer.PeftTrainer.jit_train_and_eval_step is model_donation.jit_train_and_eval_step,
    )
    tunix = trained("tunix")  # then Tunix's own, before the patch replaces its method for every trainer
    print(json.dumps({"guard": guard, "tunix": tunix, "patched": trained("patched")}))
