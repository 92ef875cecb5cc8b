"""LoRA on a slice: the model's random keys placed on the mesh by `jit`, which takes them, not `device_put`, which
refuses them in a job of several processes.

MaxText 0.2.3's `lora_utils.apply_lora_to_model` places the state of the model qwix has wrapped on the mesh with
Tunix 0.1.7's `reshard.reshard_pytree`, which, without pathwaysutils' resharding, is `jax.device_put` over the
whole tree. That state holds the model's random streams (`nnx.Rngs`), whose keys are typed key arrays. On a slice,
one process per host, every array of the state is global (not fully addressable), and JAX 0.10.1's `device_put`
moves a global array only when it is an `ArrayImpl` (`_device_put_sharding_impl`); a key array is not one, so it
falls through to "device_put's second argument must be a Device or a Sharding which represents addressable
devices", and the trainer stops on every host before its first step (the CPU stand-in of a slice, two processes,
tests/slice/test_lora_slice.py). `jit` with the target sharding as its output's moves a global key array as it
moves any other array; the rest of the tree still goes through Tunix's function. A job of one process, where every
array is addressable and `device_put` takes keys too, runs Tunix's function unchanged.

Runs in the MaxText venv: the trainer's launcher applies it to Tunix's loop (workload/launch/trainer_launcher.py).
"""

from __future__ import annotations

import functools
from typing import Any

from workload.launch import pinned_code

PATCH = "workload/launch/lora_keys_across_hosts.py"
# sha256 of the sources this patch was written for (workload/launch/pinned_code.py): maxtext 0.2.3's
# lora_utils.apply_lora_to_model, which places the wrapped model's state with `reshard.reshard_pytree(state,
# dst_shardings)`, and google-tunix 0.1.7's reshard.reshard_pytree, which `jax.device_put`s it.
MAXTEXT_APPLY_LORA_SHA256 = "05363515444d936367f22044696ee336d850cc655ed610148ae7927cb4f42f07"
TUNIX_RESHARD_PYTREE_SHA256 = "e21306104c85237ce236b19fda52b203e1698070fe003117510492e2e1fde1b9"


def patch_tunix() -> None:
    from maxtext.utils import lora_utils
    from tunix.rl import reshard

    pinned_code.check(lora_utils, "apply_lora_to_model", "maxtext", MAXTEXT_APPLY_LORA_SHA256, PATCH)
    pinned_code.check(reshard, "reshard_pytree", "google-tunix", TUNIX_RESHARD_PYTREE_SHA256, PATCH)
    reshard.reshard_pytree = _keys_by_jit(reshard.reshard_pytree)


def _keys_by_jit(reshard_pytree: Any) -> Any:
    @functools.wraps(reshard_pytree)
    def reshard_keys_by_jit(source: Any, target: Any, *args: Any, **kwargs: Any) -> Any:
        import jax

        if jax.process_count() == 1:
            return reshard_pytree(source, target, *args, **kwargs)
        leaves, tree = jax.tree.flatten(source)
        shardings = tree.flatten_up_to(target)
        keys = [isinstance(x, jax.Array) and jax.dtypes.issubdtype(x.dtype, jax.dtypes.prng_key) for x in leaves]
        placed = iter(
            reshard_pytree(
                [x for x, key in zip(leaves, keys, strict=True) if not key],
                [s for s, key in zip(shardings, keys, strict=True) if not key],
                *args,
                **kwargs,
            )
        )
        return jax.tree.unflatten(
            tree, [_by_jit(x, s) if key else next(placed) for x, s, key in zip(leaves, shardings, keys, strict=True)]
        )

    return reshard_keys_by_jit


def _by_jit(key: Any, target: Any) -> Any:
    """`key` placed as `target` says: a sharding, or an array whose sharding it takes (as Tunix's function reads it)."""
    import jax

    sharding = target if isinstance(target, jax.sharding.Sharding) else target.sharding
    return jax.jit(lambda k: k, out_shardings=sharding)(key)
