"""TPU slice shapes this project knows, keyed by Cloud TPU accelerator type.

One table feeds both the VM's machine type (infra) and the TPU runtime environment MaxText needs on the
VM (workload), so the two can never disagree.

Google's v6e table (cloud.google.com/tpu/docs/v6e, "Supported configurations"): v6e-1, v6e-4 and v6e-8 are one
VM each; v6e-16 and larger are multi-host slices of `ct6e-standard-4t` VMs, 4 chips each (4x4 = 4 VMs, 4x8 = 8,
8x8 = 16, 8x16 = 32, 16x16 = 64). `ct6e-standard-8t` is single-host only. Each host holds a 2x2 block of
chips, so the host bounds are the topology divided by 2x2 (derived here, not a figure of that table).
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
    device_kind: str  # what JAX calls its chips (`jax.Device.device_kind`), a key of PEAK_BF16_TFLOPS

    @property
    def peak_bf16_tflops_per_chip(self) -> float:
        return PEAK_BF16_TFLOPS[self.device_kind]

    @property
    def hbm_bytes_per_s_per_chip(self) -> float:
        return HBM_BYTES_PER_S[self.device_kind]

    @property
    def ici_bytes_sent_per_s_per_chip(self) -> float:
        return ICI_BYTES_SENT_PER_S[self.device_kind]

    @property
    def hosts(self) -> int:
        """How many VMs carry the slice: 1 for a single-host type."""
        x, y, z = self.host_bounds
        return x * y * z

    @property
    def is_slice(self) -> bool:
        """A multi-host slice (a managed instance group of hosts), not one VM."""
        return self.hosts > 1


# Google's published peak dense bf16 compute per chip, by the device kind JAX reports for it ("Peak compute per chip
# (bf16)" on cloud.google.com/tpu/docs/v4, /v5e, /v5p and /v6e, read 2026-12-05). Each of these chips is one JAX
# device (one TensorCore, or v4's and v5p's two as one megacore), so MaxText's TFLOP/s/device is per chip. The kind
# is read from the device that ran (workload/measure/devices.py), so the lent v5e and a v6e both report an MFU.
PEAK_BF16_TFLOPS: dict[str, float] = {
    "TPU v4": 275.0,
    "TPU v5 lite": 197.0,  # v5e
    "TPU v5": 459.0,  # v5p
    "TPU v6 lite": 918.0,  # v6e (Trillium)
}

# Google's published HBM bandwidth per chip, in bytes a second ("HBM bandwidth per chip" on
# cloud.google.com/tpu/docs/v5e and /v6e, read 2026-12-05: 819 GBps and 1638 GBps; one stored copy of the v5e page
# says "800 GiBps", 859 GB/s, and the lower is kept). What workload/preflight/step_time.py divides HBM traffic by.
HBM_BYTES_PER_S: dict[str, float] = {
    "TPU v5 lite": 819e9,
    "TPU v6 lite": 1638e9,
}

# What one chip can send to the others a second over its inter-chip links (ICI): half of Google's "Bidirectional
# inter-chip interconnect (ICI) bandwidth (per chip)" (cloud.google.com/tpu/docs/v5e and /v6e, read 2026-12-05:
# 400 GBps and 800 GBps over 4 ports), which counts both directions. It is every port at once: a ring collective on
# a chip with fewer neighbours (a v6e-8's 2x4 has corners with 2) sends slower, so collectives' time is a floor.
ICI_BYTES_SENT_PER_S: dict[str, float] = {
    "TPU v5 lite": 400e9 / 2,
    "TPU v6 lite": 800e9 / 2,
}

# What a chip needs beyond what the compiled steps and the loop's figures add up to (workload/preflight/fit.py
# `Live.total`): the runtime's own allocations, fragmentation, and a chip's compiler, which is not the preflight's.
# Calibrated on the lent TPU v5e (bench/RESULTS.md, "The TPU bench on a v5e chip"): Tunix's step on 4 of gemma3-4b's
# layers ran at batch 3, predicted 14.31 GB of the chip's 16.91, and ran out of memory at batch 4, predicted 15.50 GB,
# where the chip's compiler asked 16.45 GiB of temporaries alone: the chip needs at least 1.14 and at most 1.18 times
# the prediction there, and 1.15 separates them. It is the v5e's, with its own JAX 0.10.2 and libtpu: on a v6e it is
# unproven (docs/preflight.md).
CHIP_MARGIN = 1.15
# The same for MaxText's own loop (tpu-sft:trainer native), which holds what its compiled step says: on the same chip it
# ran every batch from 1 to 6 at 4 layers, and the preflight put batch 6's compiled peak at 15.92 GB of 16.91, so the
# chip needs at most 1.06 times it; the chip's own compiler asked up to 1.04 times the preflight's figure (3.3 against
# 3.01 GiB of temporaries at batch 1; 9.0 against 9.01 at batch 6). 1.05 holds both (bench/RESULTS.md, "The
# preflight's verdict on MaxText's own loop"); no batch of it ran out of memory there, so it is not a measured edge.
CHIP_MARGINS = {"tunix": CHIP_MARGIN, "native": 1.05}

ACCELERATORS: dict[str, Accelerator] = {
    a.name: a
    for a in (
        Accelerator("v6e-1", "ct6e-standard-1t", 1, "1x1", (1, 1, 1), (1, 1, 1), "TPU v6 lite"),
        Accelerator("v6e-4", "ct6e-standard-4t", 4, "2x2", (2, 2, 1), (1, 1, 1), "TPU v6 lite"),
        Accelerator("v6e-8", "ct6e-standard-8t", 8, "2x4", (2, 4, 1), (1, 1, 1), "TPU v6 lite"),
        Accelerator("v6e-16", "ct6e-standard-4t", 16, "4x4", (2, 2, 1), (2, 2, 1), "TPU v6 lite"),
        Accelerator("v6e-32", "ct6e-standard-4t", 32, "4x8", (2, 2, 1), (2, 4, 1), "TPU v6 lite"),
        Accelerator("v6e-64", "ct6e-standard-4t", 64, "8x8", (2, 2, 1), (4, 4, 1), "TPU v6 lite"),
        Accelerator("v6e-128", "ct6e-standard-4t", 128, "8x16", (2, 2, 1), (4, 8, 1), "TPU v6 lite"),
        Accelerator("v6e-256", "ct6e-standard-4t", 256, "16x16", (2, 2, 1), (8, 8, 1), "TPU v6 lite"),
    )
}
