"""How long a compiled training step takes on a chip, on paper: the step's work as its compiler counted it, against
the chip's published rates, calibrated on what a real chip measured.

Standard library only. `compiled_cost` reads a compiled JAX executable (duck-typed: `cost_analysis()`, `as_text()`);
`predict` turns what it read into a step time. The method, and how far it is from measurements, is docs/preflight.md
("The step-time model"); the figures that calibrate it are bench/RESULTS.md ("Step time on paper").

Three parts of a step, each per chip:
- compute: the compiled program's FLOPs at the share of the chip's bf16 peak that a real chip's matrix multiplies
  reached (`MATMUL_EFFICIENCY`);
- HBM traffic: the bytes the compiled program reads and writes, at the chip's HBM bandwidth;
- collectives: the bytes each chip exchanges with the others in the compiled program's collectives (FSDP's
  all-gathers of the weights and reduce-scatters of the gradients), at the chip's ICI bandwidth.
How they combine is `predict`'s docstring.
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from dataclasses import asdict, dataclass
from typing import Any

from workload.core.accelerators import Accelerator

# The share of the chip's bf16 peak its matrix multiplies reached on the lent v5e (issue 54: "about 84 %").
MATMUL_EFFICIENCY = 0.84
# The share of the smaller of compute and HBM time that runs under the larger (`predict`), fitted on the v5e's steps.
HBM_OVERLAP = 0.5

# The collectives whose bytes cross the inter-chip links. An asynchronous one is a `-start` and a `-done`
# instruction: the `-done` gives the result (the `-start` a tuple that holds its operands too) and is counted.
COLLECTIVE_KINDS = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "collective-permute")

_DTYPE_BYTES = {
    "pred": 1,
    "s8": 1,
    "u8": 1,
    "f8e4m3fn": 1,
    "f8e5m2": 1,
    "s16": 2,
    "u16": 2,
    "f16": 2,
    "bf16": 2,
    "s32": 4,
    "u32": 4,
    "f32": 4,
    "s64": 8,
    "u64": 8,
    "f64": 8,
    "c64": 8,
    "c128": 16,
}
_SHAPE = re.compile(r"\b(" + "|".join(_DTYPE_BYTES) + r")\[([0-9,]*)\]")
_COMPUTATION = re.compile(r"^(ENTRY )?%?([\w.\-]+) .*\{\s*$")
_INSTRUCTION = re.compile(r"^\s*(?:ROOT )?%?[\w.\-]+ = (.*?) ([a-z][a-z\-]*)\(")
_CALLED = re.compile(r"\b(?:calls|body|to_apply|true_computation|false_computation)=%?([\w.\-]+)")
_BODY = re.compile(r"\bbody=%?([\w.\-]+)")
_CONDITION = re.compile(r"\bcondition=%?([\w.\-]+)")
_CONSTANT = re.compile(r"^\s*%?([\w.\-]+) = [su](?:32|64)\[\]\S* constant\(([0-9]+)\)")
_BELOW = re.compile(r"^\s*ROOT %?[\w.\-]+ = pred\[\]\S* compare\(%?[\w.\-]+, %?([\w.\-]+)\), direction=LT")
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")
_TRIP_COUNT = re.compile(r'"known_trip_count":\{"n":"([0-9]+)"\}')
_LISTED_GROUPS = re.compile(r"replica_groups=\{\{([0-9,]*)\}")
_IOTA_GROUPS = re.compile(r"replica_groups=\[([0-9]+),([0-9]+)\]")
_DEFINED = re.compile(r"^\s*(?:ROOT )?%?([\w.\-]+) = (.*?) [a-z][a-z\-]*\(")
_DIM_LABELS = re.compile(r"dim_labels=[^_]*_([^-]*)->")
_NAME = re.compile(r"%([\w.\-]+)")
# Instructions that move no bytes of their own in HBM: views, tuples, control flow (their bodies are counted), and the
# halves of asynchronous operations, whose other half or called computation counts them.
_NO_TRAFFIC = {
    "parameter",
    "constant",
    "get-tuple-element",
    "tuple",
    "bitcast",
    "while",
    "conditional",
    "call",
    "after-all",
    "partition-id",
    "replica-id",
    "opt-barrier",
}
_PARTITIONS = re.compile(r"\bnum_partitions=([0-9]+)")


@dataclass(frozen=True)
class CompiledCost:
    """One chip's work in one compiled step, as its compiler counted it."""

    flops: float  # XLA's cost analysis: floating-point operations
    hbm_bytes: float  # XLA's cost analysis: bytes the program reads and writes in HBM ("bytes accessed")
    collective_bytes: dict[str, float]  # bytes each chip sends to the others, by kind (COLLECTIVE_KINDS)

    @property
    def ici_bytes(self) -> float:
        return sum(self.collective_bytes.values())


@dataclass(frozen=True)
class StepPrediction:
    """A step's time on paper, its parts, and what bounds it."""

    step_s: float
    tokens_per_s_per_chip: float
    mfu: float  # MaxText's count of the model's FLOPs (no rematerialisation) over the chip's bf16 peak, as it logs
    compute_s: float
    hbm_s: float
    collectives_s: float
    bound: str  # "compute", "HBM" or "collectives": the largest part

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def compiled_cost(compiled: Any) -> CompiledCost:
    """What `compiled` (a `jax.stages.Compiled` for one chip of a topology) costs each chip per call."""
    return cost_of(cost_analysis(compiled), compiled.as_text())


def cost_analysis(compiled: Any) -> dict[str, float]:
    """XLA's own FLOPs and bytes accessed for `compiled`, each loop's body counted once."""
    analysis = compiled.cost_analysis()
    if isinstance(analysis, list):  # older JAX: one dict per device program, all the same under SPMD
        analysis = analysis[0]
    return {"flops": float(analysis["flops"]), "bytes accessed": float(analysis["bytes accessed"])}


def cost_of(analysis: dict[str, float], hlo: str) -> CompiledCost:
    """The step's cost from XLA's cost analysis of it and its HLO text: the analysis scaled to every loop iteration
    (`loop_factors`), the collectives read from the text."""
    flops_factor, bytes_factor = loop_factors(hlo)
    return CompiledCost(
        flops=analysis["flops"] * flops_factor,
        hbm_bytes=analysis["bytes accessed"] * bytes_factor,
        collective_bytes=collective_bytes(hlo),
    )


def loop_factors(hlo: str) -> tuple[float, float]:
    """How much more the step's matrix multiplies' FLOPs and its instructions' bytes come to when each loop's body
    counts once per iteration than when it counts once: XLA:TPU's cost analysis counts a loop's body once (a loop of
    8 matrix multiplies compiled for a v5e read as 1), and a v6e-8's gemma3-4b step runs 30 of its 34 layers in
    a loop of 5. The cost analysis's totals are scaled by these, read from the HLO text: the FLOPs of convolutions
    (XLA's matrix multiplies), the bytes of each instruction's operands and result outside fusions."""
    computations, entry = _computations(hlo)
    runs = _runs(computations, entry)
    fused = {
        callee for lines in computations.values() for line in lines if " fusion(" in line for callee in _callees(line)
    }
    flops: dict[str, float] = defaultdict(float)
    bytes_: dict[str, float] = defaultdict(float)
    for name, lines in computations.items():
        types = {m[1]: m[2] for m in map(_DEFINED.match, lines) if m}
        for line in lines:
            flops[name] += _convolution_flops(line, types)
            if name not in fused:
                bytes_[name] += _bytes_touched(line, types)
    return (
        _ratio(sum(runs.get(n, 0) * f for n, f in flops.items()), sum(f for n, f in flops.items() if runs.get(n))),
        _ratio(sum(runs.get(n, 0) * b for n, b in bytes_.items()), sum(b for n, b in bytes_.items() if runs.get(n))),
    )


def _ratio(counted: float, once: float) -> float:
    return counted / once if once else 1.0


def _convolution_flops(line: str, types: dict[str, str]) -> float:
    """2 × the output's elements × the weights each output element takes (the right operand's elements per
    output feature)."""
    match = _INSTRUCTION.match(line)
    labels = _DIM_LABELS.search(line)
    if match is None or match[2] != "convolution" or labels is None:
        return 0.0
    operands = _operands(line, match)
    if len(operands) != 2 or operands[1] not in types:
        return 0.0
    rhs = _dims(types[operands[1]])
    out_features = rhs[labels[1].index("o")] if "o" in labels[1] and rhs else 1
    return 2.0 * math.prod(_dims(match[1])) * math.prod(rhs) / max(out_features, 1)


def _bytes_touched(line: str, types: dict[str, str]) -> float:
    match = _INSTRUCTION.match(line)
    if match is None or match[2] in _NO_TRAFFIC:
        return 0.0
    return float(_shapes_bytes(match[1]) + sum(_shapes_bytes(types.get(o, "")) for o in _operands(line, match)))


def _operands(line: str, match: re.Match[str]) -> list[str]:
    start = match.end()
    return _NAME.findall(line[start : line.index(")", start)])


def _dims(types: str) -> list[int]:
    shape = _SHAPE.search(types)
    return [int(d) for d in shape[2].split(",") if d] if shape else []


def collective_bytes(hlo: str) -> dict[str, float]:
    """Bytes each chip sends per call of the partitioned (per-chip) HLO module `hlo`, by collective kind.

    Each collective counts what a chip must send to the others of its group of n chips in a ring, the pattern that
    moves the fewest bytes, from the size R of its result on one chip (the compiled text names operands without
    their shapes):
    - all-gather: R × (n - 1) / n, its own shard to every other chip;
    - reduce-scatter: R × (n - 1), every shard but its own, summed on the way;
    - all-reduce: 2 × R × (n - 1) / n, a reduce-scatter then an all-gather;
    - all-to-all: R × (n - 1) / n;
    - collective-permute: R, to one other chip.
    A collective inside a loop counts once per iteration (the loop's known trip count), inside any other called
    computation once per call. A collective over a group of one chip moves nothing.
    """
    computations, entry = _computations(hlo)
    partitions = _PARTITIONS.search(hlo)
    every_chip = int(partitions[1]) if partitions else 1
    runs = _runs(computations, entry)
    sent: dict[str, float] = defaultdict(float)
    for name, lines in computations.items():
        for line in lines:
            collective = _collective(line)
            if collective is None:
                continue
            kind, result = collective
            n = _group_size(line, every_chip)
            if n > 1:
                sent[kind] += runs.get(name, 0) * _shapes_bytes(result) * _share_sent(kind, n)
    return {kind: sent[kind] for kind in COLLECTIVE_KINDS if sent[kind]}


def _computations(hlo: str) -> tuple[dict[str, list[str]], str]:
    """(each computation's instruction lines by name, the entry computation's name)."""
    computations: dict[str, list[str]] = {}
    entry, lines = "", None
    for line in hlo.splitlines():
        header = _COMPUTATION.match(line)
        if header and " = " not in line:
            lines = computations.setdefault(header[2], [])
            entry = header[2] if header[1] else entry
        elif line.strip() == "}":
            lines = None
        elif lines is not None:
            lines.append(line)
    return computations, entry


def _callees(line: str) -> list[str]:
    branches = _BRANCHES.search(line)
    listed = [b.strip().lstrip("%") for b in branches[1].split(",")] if branches else []
    return _CALLED.findall(line) + listed


def _runs(computations: dict[str, list[str]], entry: str) -> dict[str, int]:
    """How many times each computation runs per run of `entry`: a loop's body its trip count times per run of the
    loop (`_trip_count`), a branch as if it were taken every time."""
    runs: dict[str, int] = defaultdict(int)

    def visit(name: str, times: int) -> None:
        runs[name] += times
        for line in computations.get(name, []):
            body = _BODY.search(line)
            for callee in _callees(line):
                is_body = body is not None and body[1] == callee
                visit(callee, times * _trip_count(line, computations) if is_body else times)

    visit(entry, 1)
    return runs


def _trip_count(loop: str, computations: dict[str, list[str]]) -> int:
    """A loop's iterations: the count XLA annotated, else the constant its condition compares the counter below
    (XLA:TPU's own loops, such as a matrix multiply split around collective-permutes, count from 0 by 1 and carry
    no annotation), else 1: a floor."""
    known = _TRIP_COUNT.search(loop)
    if known:
        return int(known[1])
    condition = _CONDITION.search(loop)
    lines = computations.get(condition[1], []) if condition else []
    constants = {m[1]: int(m[2]) for m in map(_CONSTANT.match, lines) if m}
    below = [m[1] for m in map(_BELOW.match, lines) if m]
    return constants.get(below[0], 1) if below else 1


def _collective(line: str) -> tuple[str, str] | None:
    """(its kind, its result's type) where `line` is a collective, counted once: its `-done` half if asynchronous."""
    match = _INSTRUCTION.match(line)
    if match is None or match[2].endswith("-start"):
        return None
    kind = match[2].removesuffix("-done")
    return (kind, match[1]) if kind in COLLECTIVE_KINDS else None


def _group_size(line: str, every_chip: int) -> int:
    listed = _LISTED_GROUPS.search(line)
    if listed:
        return len(listed[1].split(","))
    iota = _IOTA_GROUPS.search(line)
    if iota:
        return int(iota[2])
    return every_chip  # no groups: every chip of the module


def _shapes_bytes(types: str) -> int:
    """The bytes of every array in an HLO type (`bf16[8,2560]{1,0}`, or a tuple of them)."""
    total = 0
    for dtype, dims in _SHAPE.findall(types):
        size = _DTYPE_BYTES[dtype]
        for d in filter(None, dims.split(",")):
            size *= int(d)
        total += size
    return total


def _share_sent(kind: str, n: int) -> float:
    """What a chip sends, as a multiple of its result's size (collective_bytes)."""
    return {
        "all-gather": (n - 1) / n,
        "reduce-scatter": n - 1,
        "all-reduce": 2 * (n - 1) / n,
        "all-to-all": (n - 1) / n,
        "collective-permute": 1.0,
    }[kind]


def predict(
    cost: CompiledCost, accelerator: Accelerator, tokens_per_step_per_chip: int, model_flops: float
) -> StepPrediction:
    """The step's time on one chip of `accelerator`, its throughput, and MaxText's MFU (`model_flops`: MaxText's count
    of the step's FLOPs per chip, what its TFLOP/s/device divides).

    Compute and HBM traffic overlap in part: within a fused operation the TPU streams operands from HBM while its
    matrix units work, but much of a step's traffic is in operations with little compute (the optimizer's update of
    every weight, normalisations, the loss over the vocabulary), which nothing hides. So the step is the larger of
    the two plus the share `1 - HBM_OVERLAP` of the smaller, with HBM_OVERLAP fitted to the v5e chip's steps
    (bench/RESULTS.md, "Step time on paper"). The collectives run asynchronously beside the computation (XLA
    schedules FSDP's all-gather of the next layer's weights during this layer's work): they cost time only where
    they take longer than the rest, so the step is the larger of the two. No chip here measured that part: the v5e
    had one chip, and no collective.
    """
    peak = accelerator.peak_bf16_tflops_per_chip * 1e12
    compute_s = cost.flops / (peak * MATMUL_EFFICIENCY)
    hbm_s = cost.hbm_bytes / accelerator.hbm_bytes_per_s_per_chip
    collectives_s = cost.ici_bytes / accelerator.ici_bytes_sent_per_s_per_chip
    computation_s = max(compute_s, hbm_s) + (1 - HBM_OVERLAP) * min(compute_s, hbm_s)
    step_s = max(computation_s, collectives_s)
    parts = {"compute": compute_s, "HBM": hbm_s, "collectives": collectives_s}
    return StepPrediction(
        step_s=step_s,
        tokens_per_s_per_chip=tokens_per_step_per_chip / step_s,
        mfu=model_flops / step_s / peak,
        compute_s=compute_s,
        hbm_s=hbm_s,
        collectives_s=collectives_s,
        bound=max(parts, key=lambda k: parts[k]),
    )
