"""Run by the MaxText venv's Python, as one of two processes of one JAX job on the CPU (a slice's hosts, one device
each): what JAX 0.10.1 and Tunix 0.1.7 do with the two kinds of array a LoRA trainer places across hosts, and what
the launcher's patches do instead. `python across_hosts_live.py PROCESS_ID COORDINATOR_PORT`; prints JSON.

- a random key that is already global (`nnx.Rngs`' keys in the model's state), placed by Tunix's
  `reshard.reshard_pytree` (as MaxText's `apply_lora_to_model` places it), without and with
  workload/launch/lora_keys_across_hosts.py;
- a host's own counter (nnx.Optimizer's `count` of a LoRA optimizer), placed by `jax.device_put` as the optimizer's
  placement did before (workload/launch/optimizer_placement.py) and by that placement now;
- what the key patch says to code it was not written for (another source, another version), and whether it patched.
"""

import os
import sys

os.environ["JAX_PLATFORMS"] = "cpu"

import json  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import Mesh, NamedSharding, PartitionSpec  # noqa: E402

from tests.workload.launch.patch_guard import refusals  # noqa: E402


def failure(attempt) -> str | None:
    """The exception's first line, or None where `attempt` ran."""
    try:
        attempt()
    except Exception as error:  # noqa: BLE001 - whichever JAX raises is the finding
        return f"{type(error).__name__}: {str(error).splitlines()[0]}"
    return None


def main(process_id: int, port: int) -> None:
    jax.distributed.initialize(f"127.0.0.1:{port}", num_processes=2, process_id=process_id)
    from tunix.rl import reshard

    from workload.launch import lora_keys_across_hosts, optimizer_placement

    devices = np.array(jax.devices())
    made = NamedSharding(Mesh(devices, ("fsdp",)), PartitionSpec())
    target = NamedSharding(Mesh(devices, ("data",)), PartitionSpec())  # the same devices, another mesh: a reshard
    key = jax.jit(lambda: jax.random.key(7), out_shardings=made)()
    weight = jax.jit(lambda: jnp.arange(4.0), out_shardings=made)()
    state = {"rngs": {"key": key}, "weight": weight}
    shardings = {"rngs": {"key": target}, "weight": target}
    said: dict[str, object] = {"tunix": failure(lambda: reshard.reshard_pytree(state, shardings))}
    reshard.reshard_pytree = lora_keys_across_hosts._keys_by_jit(reshard.reshard_pytree)
    placed = reshard.reshard_pytree(state, shardings)
    said["patched"] = {
        "key_data": np.asarray(jax.random.key_data(placed["rngs"]["key"])).tolist(),
        "expected_key_data": np.asarray(jax.random.key_data(jax.random.key(7))).tolist(),
        "weight": np.asarray(placed["weight"].addressable_data(0)).tolist(),
        "shardings": sorted({str(a.sharding.mesh.axis_names) for a in jax.tree.leaves(placed)}),
    }

    def count() -> jax.Array:
        return jax.device_put(jnp.array(3, jnp.int32), jax.local_devices()[0])  # committed to this host's device

    said["device_put"] = failure(lambda: jax.device_put(count(), target, donate=True).addressable_shards)
    counter = optimizer_placement.place(count(), target)
    said["placement"] = {
        "value": int(counter.addressable_data(0)),
        "shards": len(counter.addressable_shards),
        "global": not counter.is_fully_addressable,
    }
    unpatched = reshard.reshard_pytree
    said["guard"] = refusals(
        lora_keys_across_hosts, "TUNIX_RESHARD_PYTREE_SHA256", lambda: reshard.reshard_pytree is not unpatched
    )
    print(json.dumps(said), flush=True)
    jax.distributed.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]))
