"""TPU slice shapes this project knows, keyed by Cloud TPU accelerator type.

One table feeds both the VM's machine type (infra) and the TPU runtime environment MaxText needs on the
VM (workload), so the two can never disagree.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Accelerator:
    name: str  # Cloud TPU accelerator type, e.g. "v6e-8"
    machine_type: str  # Compute Engine machine type that carries it
    chips: int
    topology: str  # TPU_TOPOLOGY
    chips_per_host_bounds: tuple[int, int, int]
    host_bounds: tuple[int, int, int]
    # Google's published peak dense bf16 compute per chip (Cloud TPU v6e docs: 918 TFLOP/s). A v6e chip
    # has one TensorCore, so it is one JAX device: MaxText's TFLOP/s/device is per chip.
    peak_bf16_tflops_per_chip: float


ACCELERATORS: dict[str, Accelerator] = {
    a.name: a
    for a in (
        Accelerator("v6e-1", "ct6e-standard-1t", 1, "1x1", (1, 1, 1), (1, 1, 1), 918.0),
        Accelerator("v6e-4", "ct6e-standard-4t", 4, "2x2", (2, 2, 1), (1, 1, 1), 918.0),
        Accelerator("v6e-8", "ct6e-standard-8t", 8, "2x4", (2, 4, 1), (1, 1, 1), 918.0),
    )
}
