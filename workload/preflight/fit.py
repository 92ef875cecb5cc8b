"""What a preflight compile says, as figures: a chip's memory against its HBM, the compiler's out-of-memory
message read back into bytes, and lower bounds on step time, run time and money from the step's FLOPs.

Standard library only: the figures are tested without JAX, and a caller without MaxText can read them.
The compile itself is workload/preflight/aot_step.py; the command is workload/preflight/__main__.py.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from workload.core.accelerators import ACCELERATORS, CHIP_MARGINS
from workload.core.config import set_hint, stack_key

GIB = 2**30
# XLA:TPU refuses a step that needs more HBM than a chip has in one of two messages (both seen compiling for a
# v6e topology): the total, "CompileTimeHbmOom: ... Used 44.53G of 31.25G hbm. Exceeded hbm capacity by 13.29G."
# (binary units: eight 6 GiB arguments read "Used 48.00G"; the limit is the chip's 31.5 GiB less the 260 MiB the
# runtime reserves), or one buffer alone, "Allocation (size=51539607552) would exceed memory (size=33822867456)".
# Either is a floor, not the step's whole need: gemma3-4b's SFT step at batch 16 on a v6e-8 read "Used 31.41G".
_USED_OF = re.compile(r"Used ([0-9.]+)([KMGT]) of ([0-9.]+)([KMGT]) hbm")
_ALLOCATION = re.compile(r"Allocation \(size=([0-9]+)\) would exceed memory \(size=([0-9]+)\)")
_UNIT = {"K": 2**10, "M": 2**20, "G": 2**30, "T": 2**40}
# Below this, halving the sequence is no longer worth suggesting before more chips.
_SHORTEST_SEQUENCE_TO_HALVE = 512


def parse_hbm_oom(message: str) -> tuple[int, int] | None:
    """(bytes needed at least, bytes the chip allows) from the compiler's HBM refusal; None for any other error."""
    total = _USED_OF.search(message)
    if total is not None:
        used, used_unit, limit, limit_unit = total.groups()
        return round(float(used) * _UNIT[used_unit]), round(float(limit) * _UNIT[limit_unit])
    allocation = _ALLOCATION.search(message)
    if allocation is not None:
        return int(allocation[1]), int(allocation[2])
    return None


@dataclass(frozen=True)
class Memory:
    """One chip's share of the compiled step (XLA's memory analysis), in bytes. The step's outputs that reuse
    a donated argument's buffer (aliased) need no memory of their own."""

    arguments: int
    outputs: int
    aliased: int
    temporaries: int
    generated_code: int
    peak: int = 0  # the buffer assignment's own peak; 0 where the compiler gives none

    @property
    def parts(self) -> int:
        """The sum of the parts: every buffer as if all lived at once."""
        return self.arguments + self.outputs - self.aliased + self.temporaries + self.generated_code

    @property
    def total(self) -> int:
        """The peak when the compiler gives one: the sum of the parts counts buffers that never live at the same
        time (gemma3 at a batch near the limit: the sum came to 105 % of HBM, and the compiler accepted it)."""
        return self.peak or self.parts


@dataclass(frozen=True)
class Live:
    """What one chip holds at the worst moment of a training loop, in bytes, from the compiled steps.

    Each step's peak is the compiler's. Beside it the loop holds what no one step's analysis counts:
    - The loop lets `in_flight` steps run ahead of the one on the chip: their input batches are already placed, and
      the values the steps before returned are held until the loop has logged them. Counted as `in_flight` × (one
      batch + one step's returned values), a bound: the updated weights and optimizer state of a queued step are
      allocated only when it runs (the TPU runtime allocates in the order the steps run). Tunix's loop: its
      `max_inflight_computations`, 2; MaxText's own: 1 (workload/preflight/native_step.py).
    - The held-out loss's step (eval) takes the weights and a batch (MaxText's own loop hands it the whole state,
      and jit drops the arguments it does not read); the optimizer's state stays in HBM beside it without being
      one. Its peak is counted with that state, and the larger of the two steps binds. Both programs are loaded on
      the chip from the first pass on, so each is counted with the other's code.
    """

    train: Memory
    eval: Memory | None  # None: the run does not evaluate
    batch: int  # one train step's input batch, per chip
    eval_batch: int  # one eval step's input batch, per chip
    in_flight: int
    # Whether a resumed attempt holds its restored state again beside the step (`resumed`): Tunix's loop did, on the
    # chip; MaxText's own restores into the state it trains (maxtext_utils.setup_initial_state), not yet measured.
    resume_keeps_a_copy: bool = True
    # The weights the train step reads that no checkpoint holds: LoRA's frozen base (Tunix saves only the adapters,
    # tunix/sft/checkpoint_manager.py 120), which a resumed attempt does not restore again.
    frozen: int = 0
    margin: float = CHIP_MARGINS["tunix"]  # what the chip needs beyond the total, the loop's (CHIP_MARGINS)

    @property
    def returned(self) -> int:
        """The train step's own return values: its outputs but the updated state (its arguments but the batch)."""
        return max(self.train.outputs - (self.train.arguments - self.batch), 0)

    @property
    def beside(self) -> int:
        return self.in_flight * (self.batch + self.returned)

    @property
    def optimizer_state(self) -> int:
        """What the eval step leaves resident: the train step's state arguments but the weights the eval takes."""
        if self.eval is None:
            return 0
        return (self.train.arguments - self.batch) - (self.eval.arguments - self.eval_batch)

    @property
    def train_peak(self) -> int:
        return self.train.total + (0 if self.eval is None else self.eval.generated_code)

    @property
    def eval_peak(self) -> int:
        return 0 if self.eval is None else self.eval.total + self.optimizer_state + self.train.generated_code

    @property
    def binding(self) -> str:
        return "eval" if self.eval_peak > self.train_peak else "train"

    def counted(self) -> str:
        """What the verdict adds up, in words."""
        if self.binding == "eval":
            step = "the eval step's peak, the optimizer's state and the train step's code"
        else:
            step = "the train step's peak" + ("" if self.eval is None else " and the eval step's code")
        steps = "step" if self.in_flight == 1 else "steps"
        return f"{step} + {gib(self.beside)} for {self.in_flight} {steps} in flight"

    @property
    def total(self) -> int:
        return max(self.train_peak, self.eval_peak) + self.beside

    @property
    def state(self) -> int:
        """What a checkpoint restores: the train step's state arguments (the weights and the optimizer's state) but
        the frozen weights."""
        return self.train.arguments - self.batch - self.frozen

    @property
    def resumed(self) -> int:
        """A resumed attempt's peak. In Tunix's loop its restored state stays beside the train step's peak: on the lent
        v5e a resumed run (1 of gemma3-4b's layers, batch 1) peaked at 15.31 GB where a fresh one peaked at 9.22 and
        this reads 15.24 (bench/RESULTS.md): measured once, and why the copy lives on is not known. MaxText's own
        loop restores the state in place of the one it would initialise: a fresh attempt's peak."""
        return self.train_peak + (self.state if self.resume_keeps_a_copy else 0) + self.beside

    @property
    def needed(self) -> int:
        """What the verdict holds against the chip's HBM: the total with the chip's margin, or a resumed attempt's
        peak where that is larger (a run on a VM resumes after a lost VM or a cancel)."""
        return max(round(self.total * self.margin), self.resumed)

    def parts(self) -> dict[str, float | str | None]:
        """As the record shows them."""
        return {
            "train_step_peak": self.train.total,
            "eval_step_peak": self.eval.total if self.eval is not None else None,
            "optimizer_state_beside_eval": self.optimizer_state,
            "train_with_eval_code": self.train_peak,
            "eval_with_optimizer_and_train_code": self.eval_peak,
            "binding_step": self.binding,
            "in_flight_steps": self.in_flight,
            "batch": self.batch,
            "returned_per_step": self.returned,
            "beside_the_step": self.beside,
            "total": self.total,
            "chip_margin": self.margin,
            "frozen_weights": self.frozen,
            "restored_state": self.state,
            "resumed": self.resumed,
            "needed": self.needed,
        }


@dataclass(frozen=True)
class Bounds:
    """Lower bounds on time and money and an upper bound on throughput, from FLOPs at the chip's peak: no
    real step is faster, none of these is a prediction."""

    step_seconds_at_least: float
    tokens_per_second_at_most: float
    run_hours_at_least: float
    usd_at_least: float | None  # None: no price per chip-hour was given


def bounds(
    flops_per_step_per_chip: float,
    peak_tflops_per_chip: float,
    tokens_per_step: int,
    steps: int,
    chips: int,
    usd_per_chip_hour: float | None,
) -> Bounds:
    step_s = flops_per_step_per_chip / (peak_tflops_per_chip * 1e12)
    run_h = steps * step_s / 3600
    return Bounds(
        step_seconds_at_least=step_s,
        tokens_per_second_at_most=tokens_per_step / step_s if step_s > 0 else float("inf"),
        run_hours_at_least=run_h,
        usd_at_least=None if usd_per_chip_hour is None else run_h * chips * usd_per_chip_hour,
    )


def gib(n: int) -> str:
    return f"{n / GIB:.2f} GiB"


def fits_line(accelerator: str, live: Live, limit: int) -> str:
    """The line a person reads when the step fits: the verdict, then what it counts."""
    used = live.needed
    counted = (
        f"{live.counted()}, × {live.margin} the chip's margin"
        if used > live.resumed
        else f"a resumed attempt: the train step's peak, its restored state and {gib(live.beside)} in flight"
    )
    return f"fits: {gib(used)} per chip of {gib(limit)} HBM on {accelerator}, {gib(limit - used)} headroom ({counted})"


def does_not_fit_line(
    accelerator: str, used: int, limit: int, per_device_batch_size: int, max_target_length: int
) -> str:
    """One line in the settings' own error form: the key to change, what is wrong, the command that changes it."""
    key, fix = fix_for(accelerator, per_device_batch_size, max_target_length)
    problem = f"does not fit: at least {gib(used)} per chip of {gib(limit)} HBM on {accelerator}"
    return f"{key}: {problem}. Fix: {fix}"


def fix_for(accelerator: str, per_device_batch_size: int, max_target_length: int) -> tuple[str, str]:
    """(the stack key to change, the command that changes it) for a step that does not fit. Halve the batch while
    there is one to halve, then the sequence; with a batch of 1 and a short sequence only more chips help (the
    weights and the optimizer state are sharded over them)."""
    chips = ACCELERATORS[accelerator].chips
    larger = next((a.name for a in ACCELERATORS.values() if a.chips > chips), None)
    if per_device_batch_size > 1:
        key, fix = "perDeviceBatchSize", set_hint("perDeviceBatchSize", str(per_device_batch_size // 2))
    elif max_target_length > _SHORTEST_SEQUENCE_TO_HALVE:
        key, fix = "maxTargetLength", set_hint("maxTargetLength", str(max_target_length // 2))
    elif larger is not None:
        key, fix = "acceleratorType", set_hint("acceleratorType", larger)
    else:
        key, fix = "model", "use a smaller model"
    return stack_key(key), fix
