"""Run by the MaxText venv's Python (Tunix lives there): how many bytes a chip's worth of device memory holds while a
real Tunix 0.1.7 PeftTrainer places its optimizer's state, with Tunix's own `_shard_optimizer` (`tunix`) or the
launcher's per-array placement (`patched`). Two CPU devices stand for a slice's chips; the state starts on one
device, as nnx.Optimizer creates it, and is placed sharded over both. Prints JSON: the live bytes before, at the
largest moment and after, the optimizer state's bytes and its largest array, and whether the state placed is the
state it was: {"tunix": …, "patched": …, "set_mesh": …}, each on a trainer of its own (`set_mesh`: patched, the
mesh set as MaxText 0.2.3 sets it); and "guard", what the patch says to code it was
not written for (another source, another version). `python optimizer_placement_live.py`."""

import os

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=2"
os.environ["JAX_PLATFORMS"] = "cpu"

import gc  # noqa: E402
import json  # noqa: E402

import jax  # noqa: E402
import numpy as np  # noqa: E402
import optax  # noqa: E402
from flax import nnx  # noqa: E402
from jax.interpreters import pxla  # noqa: E402
from jax.sharding import Mesh  # noqa: E402
from tunix.sft import peft_trainer  # noqa: E402

from tests.workload.launch.patch_guard import refusals  # noqa: E402
from workload.launch import optimizer_placement  # noqa: E402


class Model(nnx.Module):
    def __init__(self, rngs: nnx.Rngs):
        init = nnx.initializers.lecun_normal()
        self.wide = nnx.Param(init(rngs.params(), (256, 512)), sharding_names=("fsdp", None), eager_sharding=False)
        self.narrow = nnx.Param(init(rngs.params(), (512, 64)), sharding_names=("fsdp", None), eager_sharding=False)


def live_bytes() -> int:
    """Each device buffer once: jax.live_arrays() can list a sharded array and the single-device arrays of its shards
    over the same buffers (JAX 0.10 keeps those alive once `addressable_shards` has made them)."""
    buffers = {
        shard.data.unsafe_buffer_pointer(): shard.data.nbytes
        for array in jax.live_arrays()
        for shard in array.addressable_shards
    }
    return sum(buffers.values())


def placed(placement: str, set_mesh: bool = False) -> dict:
    """`set_mesh`: the mesh set as MaxText 0.2.3's train_sft sets it (`jax.set_mesh`), and handed to the placement
    as Tunix hands it (`pxla.thread_resources`' mesh, which only `with mesh:` sets)."""
    mesh = Mesh(np.array(jax.devices()), ("fsdp",))
    trainer = peft_trainer.PeftTrainer(
        Model(nnx.Rngs(0)), optax.adamw(1e-3), peft_trainer.TrainingConfig(eval_every_n_steps=0, max_steps=1)
    )
    state = nnx.state(trainer.optimizer, nnx.optimizer.OptState)
    arrays = [a for a in jax.tree.leaves(state) if isinstance(a, jax.Array)]
    before_values = [np.asarray(a) for a in arrays]
    state_bytes = sum(a.nbytes for a in arrays)
    largest = max(a.nbytes for a in arrays)
    del state, arrays  # the optimizer alone holds its state, as in a trainer
    seen = {"largest": live_bytes()}

    def watching(function):
        def watched(*args, **kwargs):
            result = function(*args, **kwargs)
            seen["largest"] = max(seen["largest"], live_bytes())
            return result

        return watched

    before = live_bytes()
    device_put, constrain = jax.device_put, jax.lax.with_sharding_constraint
    jax.device_put, jax.lax.with_sharding_constraint = watching(device_put), watching(constrain)
    with jax.set_mesh(mesh) if set_mesh else mesh:
        if (
            placement == "patched"
            and peft_trainer.PeftTrainer._shard_optimizer is not optimizer_placement.shard_optimizer
        ):
            optimizer_placement.patch_tunix()
        trainer._shard_optimizer(pxla.thread_resources.env.physical_mesh if set_mesh else mesh)
    jax.device_put, jax.lax.with_sharding_constraint = device_put, constrain
    gc.collect()
    now = [a for a in jax.tree.leaves(nnx.state(trainer.optimizer, nnx.optimizer.OptState)) if isinstance(a, jax.Array)]
    return {
        "before": before,
        "largest": seen["largest"],
        "after": live_bytes(),
        "state_bytes": state_bytes,
        "largest_array_bytes": largest,
        "same_values": all(np.array_equal(a, np.asarray(b)) for a, b in zip(before_values, now, strict=True)),
        "shardings": sorted({str(getattr(a.sharding, "spec", None)) for a in now if a.ndim == 2}),
        "kinds": sorted({type(a.sharding).__name__ for a in now}),
    }


if __name__ == "__main__":
    # first: neither refusal may have patched Tunix
    guard = refusals(
        optimizer_placement,
        "TUNIX_SHARD_OPTIMIZER_SHA256",
        lambda: peft_trainer.PeftTrainer._shard_optimizer is optimizer_placement.shard_optimizer,
    )
    tunix = placed("tunix")  # then Tunix's own, before the patch replaces its method for every trainer
    patched = placed("patched")
    print(
        json.dumps({"guard": guard, "tunix": tunix, "patched": patched, "set_mesh": placed("patched", set_mesh=True)})
    )
