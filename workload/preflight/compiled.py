"""What the compiler says of a training step compiled for a TPU topology, whichever loop's step it is (Tunix's:
aot_step.py; MaxText's own: native_step.py): its memory per chip, its FLOPs, the HBM a chip allows, or its refusal.

Runs in .maxtext-venv.
"""

from __future__ import annotations

import dataclasses
import math
import time
from typing import Any, Callable

import jax
import jax.numpy as jnp
from jax.sharding import SingleDeviceSharding
from maxtext.utils import maxtext_utils

from workload.preflight.fit import Live, Memory, parse_hbm_oom
from workload.preflight.step_time import CompiledCost, compiled_cost

# Arguments that no chip holds (a v6e has 32 GiB), each under the compiler's largest allocation (2**31 words).
_PROBE_ARGUMENTS, _PROBE_ARGUMENT_BYTES = 16, 4 * 2**30


@dataclasses.dataclass(frozen=True)
class CompiledStep:
    live: Live  # the train step's memory, the eval step's when the run evaluates, and what the loop holds beside
    flops: float  # per chip, per step: XLA's cost analysis of the compiled program
    # per chip, per step: MaxText's own count of the model's matmuls (what its TFLOP/s/device divides), no remat
    maxtext_flops: float
    seconds: float  # building the abstract state, tracing, lowering and compiling
    hbm_limit: int  # bytes per chip the compiler allows (hbm_limit below)
    config: Any  # MaxText's config, as the trainer would parse it
    cost: CompiledCost  # the train step's work per chip, as the step-time model reads it (step_time.py)


class HbmOom(Exception):
    """The compiler refused the step: it needs more HBM per chip than the chip has."""

    def __init__(self, used: int, limit: int, seconds: float, config: Any):
        self.used, self.limit, self.seconds, self.config = used, limit, seconds, config
        super().__init__(f"needs {used} bytes of HBM per chip, {limit} allowed")


def compile_step(config: Any, mesh: Any, compile_loop: Callable[[], tuple[Any, Live]]) -> CompiledStep:
    """Run `compile_loop` (the train step compiled, what one chip holds) and read the figures, or its refusal."""
    start = time.monotonic()
    try:
        compiled, live = compile_loop()
    except jax.errors.JaxRuntimeError as error:
        oom = parse_hbm_oom(str(error))
        if oom is None:
            raise
        raise HbmOom(*oom, time.monotonic() - start, config) from None
    seconds = time.monotonic() - start
    limit = hbm_limit(mesh.devices.flat[0])
    maxtext_tflops, _, _ = maxtext_utils.calculate_tflops_training_per_device(config, log=False)
    cost = compiled_cost(compiled)
    return CompiledStep(live, cost.flops, maxtext_tflops * 1e12, seconds, limit, config, cost)


def memory(compiled: Any) -> Memory:
    analysis = compiled.memory_analysis()
    return Memory(
        arguments=analysis.argument_size_in_bytes,
        outputs=analysis.output_size_in_bytes,
        aliased=analysis.alias_size_in_bytes,
        temporaries=analysis.temp_size_in_bytes,
        generated_code=analysis.generated_code_size_in_bytes,
        peak=analysis.peak_memory_in_bytes,
    )


def bytes_per_chip(arrays: Any) -> int:
    """One chip's share of a pytree of sharded abstract arrays, at their dtypes' bits: a QLoRA base's nf4 weights are
    uint4, two to a byte, which numpy's `itemsize` counts as one byte each."""
    return sum(
        math.ceil(math.prod(a.sharding.shard_shape(a.shape)) * jax.dtypes.itemsize_bits(a.dtype) / 8)
        for a in jax.tree.leaves(arrays)
    )


def no_compilation_cache() -> None:
    """pyconfig turns on JAX's persistent cache (jax_cache_dir), where a compile-only executable, which nothing can
    load, would sit beside real runs' entries."""
    jax.config.update("jax_enable_compilation_cache", False)


def hbm_limit(device: Any) -> int:
    """The HBM per chip that the compiler allows a program, in bytes (31.25 GiB on a v6e: 31.5 GiB less 260 MiB
    it reserves). It says so only when a program does not fit, so ask it: compile one whose arguments cannot
    fit on one chip, and read its refusal (to its 0.01 GiB)."""
    argument = jax.ShapeDtypeStruct((_PROBE_ARGUMENT_BYTES,), jnp.int8, sharding=SingleDeviceSharding(device))
    try:
        jax.jit(lambda *xs: [x[0] for x in xs]).lower(*[argument] * _PROBE_ARGUMENTS).compile()
    except jax.errors.JaxRuntimeError as error:
        oom = parse_hbm_oom(str(error))
        if oom is not None:
            return oom[1]
        raise
    raise RuntimeError(f"{device.device_kind}: the compiler accepted {_PROBE_ARGUMENTS * _PROBE_ARGUMENT_BYTES} bytes")
