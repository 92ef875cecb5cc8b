"""What one trainer's log says, read line by line: its steps, the chips it ran on, their HBM, MaxText's own memory
figures, and an out-of-memory error with the bytes it asked for. Standard library only."""

from __future__ import annotations

import re
import statistics
from typing import Any

from workload.core.accelerators import PEAK_BF16_TFLOPS
from workload.launch.exit_reason import failure_cause
from workload.measure import devices, hbm_peak
from workload.run.events import parse_step

# Not steady: a run's first step compiles; its second is still slow on the chip (0.68-0.72 s against 0.15); in
# MaxText's own loop the third reads 0.020 s, the second having waited for it (its steps are timed as dispatched).
UNSTEADY_STEPS = 3
_COMPILED = re.compile(
    r"Total memory size: ([\d.]+) GB, Output size: ([\d.]+) GB, Temp size: ([\d.]+) GB, "
    r"Argument size: ([\d.]+) GB"
)
_IN_USE = re.compile(r"Using \(GB\) ([\d.]+) / ([\d.]+)")
_OOM = re.compile(r"RESOURCE_EXHAUSTED|[Oo]ut of memory|OutOfMemory")
# The flash kernel's blocks outgrow the core's scoped vector memory (VMEM), not the chip's HBM.
_VMEM = re.compile(r"CompileTimeScopedVmemOom")
_ASKED = re.compile(r"Attempting to allocate ([\d.]+)([KMG])|HLO temporaries \(([\d.]+)([KMG])\)")
_UNITS = {"K": 2**10, "M": 2**20, "G": 2**30}
# MaxText's count of a training step's FLOPs, and its split (maxtext_utils.calculate_tflops_training_per_device).
_SPLIT = re.compile(r"split as ([\d.]+)% learnable weight flops and ([\d.]+)% attention flops")
TAIL = 40


class Reading:
    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []
        self.facts: dict[str, Any] = {}
        self.tail: list[str] = []

    def observe(self, line: str) -> None:
        self.tail = [*self.tail[-(TAIL - 1) :], line]
        if (step := parse_step(line)) is not None:
            self.steps.append(step)
        elif (found := devices.parse(line)) is not None:
            self.facts.update(found)
        elif (found := hbm_peak.parse(line)) is not None:
            self.facts.update(found)
        elif (compiled := _COMPILED.search(line)) is not None:
            total, _, temp, arguments = map(float, compiled.groups())
            self.facts["maxtext_compiled_gb"] = {"total": total, "temp": temp, "arguments": arguments}
        elif (split := _SPLIT.search(line)) is not None:
            self.facts["flops_split"] = {"weights": float(split[1]) / 100, "attention": float(split[2]) / 100}
        elif (in_use := _IN_USE.search(line)) is not None and "in_use_after_setup_gb" not in self.facts:
            self.facts["in_use_after_setup_gb"] = float(in_use[1])
        if "oom" not in self.facts and _OOM.search(line):
            self.facts["oom"] = line.strip()[:400]
        if "oom" in self.facts and "oom_asked_bytes" not in self.facts and (asked := _ASKED.search(line)):
            number, unit = (asked[1], asked[2]) if asked[1] else (asked[3], asked[4])
            self.facts["oom_asked_bytes"] = round(float(number) * _UNITS[unit])

    def summary(self, returncode: int, last_step: int) -> dict[str, Any]:
        """`last_step`: the step the run logs last when it trained to its end."""
        steady = self.steps[UNSTEADY_STEPS:]
        figures: dict[str, Any] = {"returncode": returncode, **self.facts}
        figures["steps_logged"] = [self.steps[0]["step"], self.steps[-1]["step"]] if self.steps else None
        last_loss = self.steps[-1].get("loss") if self.steps else None
        figures["last_loss"] = last_loss
        if returncode == 0 and self.steps and self.steps[-1]["step"] == last_step:
            figures["outcome"] = "trained"
        elif "oom" in self.facts:
            figures["outcome"] = "out of memory" + (": VMEM, at compile" if _VMEM.search(self.facts["oom"]) else "")
        else:
            figures["outcome"] = "failed: " + failure_cause(self.tail, returncode)
        if steady:
            seconds = statistics.median(s["step_seconds"] for s in steady)
            tflops = statistics.median(s["tflops_per_device"] for s in steady)
            peak = PEAK_BF16_TFLOPS.get(self.facts.get("device_kind", ""))
            figures |= {
                "median_step_ms": round(seconds * 1000, 1),
                "tokens_per_s_per_chip": round(statistics.median(s["tokens_per_s_per_device"] for s in steady)),
                "tflops_per_chip": round(tflops, 1),
                "mfu": round(tflops / peak, 4) if peak else None,
            }
        return figures


def lora_flops_share(split: dict[str, float]) -> float:
    """The share of MaxText's count of a full training step's FLOPs that a LoRA step does. MaxText counts every
    weight's matmul three times (forward, the activations' gradient, the weight's gradient: 6 · N · T) and
    attention's score and value products with their backward; a LoRA step skips the frozen weights' gradient (a
    third of their count) and keeps attention's whole. The adapters' own matmuls (rank 16 on gemma3-4b: 29.8 M
    parameters, 0.8 % of the weights) are left out: a floor. Remat's recomputed forward is not counted, as MFU
    never counts it."""
    return split["weights"] * 2 / 3 + split["attention"]
