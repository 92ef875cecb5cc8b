"""Tunix's optimizer state placed one array at a time, so that a chip never holds it twice.

Tunix 0.1.7 places the optimizer's state on the mesh before it jits the step (`PeftTrainer._shard_optimizer`,
tunix/sft/peft_trainer.py 382-397) with `jax.lax.with_sharding_constraint` over the whole state, outside `jit`:
every array is copied while its original lives, so for a moment a chip holds the optimizer's state twice. On a TPU
v5e chip every configuration of the seed's run failed so, before step 1 (`RESOURCE_EXHAUSTED … Attempting to
allocate 50.00M … 25.07M free` in `_shard_optimizer`; bench/tpu/RESULTS, ../shared/tpu/README.md), where the
preflight, which compiles the step and not this copy, had said it fits.

Here each array is put in its place on its own, donating the original (`jax.device_put(…, donate=True)`): the
runtime reuses or frees it as the copy is made, so the most a chip holds beyond the state is one array of it.
Where a backend does not honour the donation (a CPU's), the original is deleted once its copy exists and shares
no buffer with it: nothing else refers to it, the optimizer alone holds its state. An array already placed with
that very sharding is left as it is; one whose sharding is only equivalent (a single device's, where the mesh has one
device) is placed too: jit keys its cache on the sharding's kind, and the step returns the state with the mesh's, so
step 2 would compile again (`mesh_in_effect`). Tunix's main branch replaced the constraint with
per-array `device_put` in July 2026 (commit cbc5b383), in no release on PyPI yet.

Runs in the MaxText venv: the trainer's launcher applies it (workload/launch/trainer_launcher.py).
"""

from __future__ import annotations

from typing import Any

from workload.launch import pinned_code

# sha256 of tunix 0.1.7's PeftTrainer._shard_optimizer source (workload/launch/pinned_code.py).
TUNIX_SHARD_OPTIMIZER_SHA256 = "f9cfa709ff552af064be8e8ae896b2c189060efcb79be570d68763eb4c935273"


def _shares_a_buffer(a: Any, b: Any) -> bool:
    pointers = {shard.data.unsafe_buffer_pointer() for shard in a.addressable_shards}
    return any(shard.data.unsafe_buffer_pointer() in pointers for shard in b.addressable_shards)


def place(array: Any, sharding: Any) -> Any:
    """`array` placed with `sharding`, its original gone: donated, or deleted where the backend kept it."""
    import jax

    if array.sharding == sharding:
        return array
    if array.is_fully_addressable and not sharding.is_fully_addressable:
        return _across_hosts(array, sharding)
    placed = jax.device_put(array, sharding, donate=True)
    if not array.is_deleted() and not _shares_a_buffer(array, placed):
        array.delete()
    return placed


def _across_hosts(array: Any, sharding: Any) -> Any:
    """A host's own array placed on a mesh across hosts (a slice: LoRA's optimizer counters, which nnx.Optimizer
    makes on one device of each host). Handed over as it is, JAX 0.10.1 moves it only by a cross-host transfer: in the
    trainer on the CPU stand-in of a slice its result could not list its own shards ("An argument array had 2
    shard(s)"), and alone `device_put` refused it (the CPU backend "does not support cross-host device transfers",
    tests/workload/launch/test_across_hosts.py). Handed over as its value, JAX checks that every host holds the same
    one and places it (`multihost_utils.assert_equal`, then each host's shards), as it places any host value."""
    import jax
    import numpy as np

    placed = jax.device_put(np.asarray(array), sharding)
    array.delete()
    return placed


def mesh_in_effect(given: Any) -> Any:
    """The mesh the trainer runs under. Tunix passes the one `with mesh:` sets (`pxla.thread_resources`), but MaxText
    0.2.3's train_sft sets it with `jax.set_mesh` (train_sft.py 276), which leaves that one empty: Tunix then placed
    nothing, its state kept a single device's sharding, the step returned it with the mesh's, and jit compiled the
    step again at step 2 (on the CPU, JAX's cache-miss report named the optimizer's counters; on the lent v5e a LoRA
    case of gemma3-4b, whose first compile took 230 s, logged nothing more after step 1 until it was killed)."""
    import jax

    return given if not given.empty else jax.sharding.get_mesh()


def shard_optimizer(trainer: Any, mesh: Any) -> None:
    """PeftTrainer._shard_optimizer's job, one array at a time, on the mesh in effect: the same arrays with the same
    shardings."""
    import jax
    from flax import nnx
    from jax.sharding import NamedSharding, PartitionSpec

    mesh = mesh_in_effect(mesh)
    if mesh.empty:
        return
    state = nnx.state(trainer.optimizer, nnx.optimizer.OptState)
    specs = nnx.get_partition_spec(state)

    def one(array: Any, spec: Any) -> Any:
        if not isinstance(array, jax.Array):
            return array
        return place(array, NamedSharding(mesh, spec if spec is not None else PartitionSpec()))

    nnx.update(trainer.optimizer, jax.tree.map(one, state, specs))


def patch_tunix() -> None:
    """Every PeftTrainer places its optimizer's state with `shard_optimizer`; only Tunix's pinned code is patched."""
    from tunix.sft import peft_trainer

    pinned_code.check(
        peft_trainer,
        "PeftTrainer._shard_optimizer",
        "google-tunix",
        TUNIX_SHARD_OPTIMIZER_SHA256,
        "workload/launch/optimizer_placement.py",
    )
    peft_trainer.PeftTrainer._shard_optimizer = shard_optimizer
