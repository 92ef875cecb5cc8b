"""python -m bench.tunix_gap [--batch N] [--layers N] [--out FILE] [--hlo DIR]: why Tunix's SFT loop (MaxText 0.2.2's
`train_sft`) held twice the state of MaxText's own (`train_sft_deprecated`, 0.2.3's `train_sft_native`) and took
44 ms more a step on a TPU v5e, read from the two loops' training steps compiled for a v5e-1 on a machine without a
TPU.

Both steps are compiled from one bench case's MaxText arguments (bench/tpu/cases.py `maxtext_arguments`: the
pipeline's argv, 4 of gemma3-4b's 34 layers, bf16 weights, batch 1 × 2,048 tokens), as each loop builds them:
- Tunix's: its PeftTrainer's train step under `nnx.jit`, the optimizer donated, MaxText's loss without the logits,
  exactly as the preflight compiles it (workload/preflight/aot_step.py);
- MaxText's own: `train.train_step` with its TrainState donated, as MaxText's `train_compile` compiles it, under
  the config `train_sft_native` parses (`use_tunix_gradient_accumulation=False`).
It prints, side by side: each loop's state array by array in aggregate (weights, moments, accumulators, counters,
their dtypes), the compiled steps' memory (arguments, outputs, what the outputs alias, temporaries), XLA's cost
analysis (FLOPs, bytes accessed) and the TPU compiler's own estimate of each instruction's cycles, by the part of
the step it comes from (bench/hlo_profile.py). A third column compiles Tunix's step without its two differences
from MaxText's (no `optax.MultiSteps`, the weights donated): what those cost. Runs in .maxtext-venv; 6-8 min a
compile on 2 shared cores, 4 GB of RAM.

    JAX_PLATFORMS=cpu DECOUPLE_GCLOUD=TRUE HF_HUB_OFFLINE=1 PYTHONPATH=. .maxtext-venv/bin/python -m bench.tunix_gap
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import json
import math
import os
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench import hlo_profile
from bench.tpu import cases as case_file

GIB = 2**30
V5E_CLOCK_HZ = 1.5e9  # a v5e TensorCore's clock: turns the compiler's estimated cycles into milliseconds


@dataclass
class Step:
    """One loop's training step, compiled: what it holds, its memory, its costs and its program."""

    loop: str
    state: dict[str, int]  # bytes by kind of array ("weights bfloat16", "first moment bfloat16" …)
    memory: dict[str, int]
    cost: dict[str, float]
    hlo: str
    seconds: float


def kind_of(path: str, dtype: str) -> str:
    """What a state array is, from its path in the loop's state (an nnx State's or a TrainState's)."""
    names = set(re.findall(r"\w+", path))
    for name, kind in (("acc_grads", "gradient accumulator"), ("mu", "first moment"), ("nu", "second moment")):
        if name in names:
            return f"{kind} {dtype}"
    if any(c in dtype for c in ("int", "key")):
        return "counters and RNG keys"
    return f"weights {dtype}"


def state_by_kind(tree: Any) -> dict[str, int]:
    import jax

    kinds: Counter[str] = Counter()
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        size = math.prod(leaf.shape) * (leaf.dtype.itemsize if hasattr(leaf.dtype, "itemsize") else 8)
        kinds[kind_of(jax.tree_util.keystr(path), str(leaf.dtype))] += size
    return dict(kinds)


def _memory(compiled: Any) -> dict[str, int]:
    analysis = compiled.memory_analysis()
    return {
        "arguments": analysis.argument_size_in_bytes,
        "outputs": analysis.output_size_in_bytes,
        "aliased": analysis.alias_size_in_bytes,
        "temporaries": analysis.temp_size_in_bytes,
        "generated_code": analysis.generated_code_size_in_bytes,
    }


def _cost(compiled: Any) -> dict[str, float]:
    cost = compiled.cost_analysis()
    return {key: float(cost.get(key, 0.0)) for key in ("flops", "bytes accessed", "transcendentals")}


def tunix_step(argv: list[str], as_released: bool = True) -> Step:
    """The preflight's compile of Tunix's step (aot_step: the trainer class, jit and loss train_sft uses). With
    `as_released=False`, what it would be without its two differences from MaxText's own step: the optimizer not
    wrapped in `optax.MultiSteps` (PeftTrainer wraps it whenever `gradient_accumulation_steps` is set, and
    train_sft always sets it, to 1 by default), and the model's weights donated beside the optimizer."""
    from unittest import mock

    import jax
    import optax
    from flax import nnx
    from flax.linen import partitioning as nn_partitioning
    from maxtext.trainers.pre_train import train_compile

    from workload.preflight import aot_step
    from workload.preflight.__main__ import train_sft_file

    def unaccumulated(config: Any, model: Any) -> Any:
        with mock.patch.object(optax, "MultiSteps", lambda tx, _steps: tx):
            return optimizer_as_released(config, model)

    optimizer_as_released = aot_step._optimizer
    config = aot_step.maxtext_config([train_sft_file(), *argv])
    mesh = train_compile.get_topology_mesh(config)
    started = time.monotonic()
    donated = ("optimizer",) if as_released else ("model", "optimizer")
    with (
        contextlib.nullcontext() if as_released else mock.patch.object(aot_step, "_optimizer", unaccumulated),
        jax.set_mesh(mesh),
        nn_partitioning.axis_rules(config.logical_axis_rules),
    ):
        model, optimizer = aot_step._abstract_model_and_optimizer(config, mesh)
        batch = aot_step._abstract_batch(config, mesh, config.global_batch_size_to_load)
        step = nnx.jit(aot_step._trainer(config, model).create_train_step_fn(), donate_argnames=donated)
        compiled = step.lower(model, optimizer, batch).compile()
    state = Counter(state_by_kind(nnx.state(model))) + Counter(state_by_kind(nnx.state(optimizer)))
    loop = "tunix" if as_released else "tunix, what-if"
    return Step(loop, dict(state), _memory(compiled), _cost(compiled), compiled.as_text(), time.monotonic() - started)


def tunix_what_if(argv: list[str]) -> Step:
    return tunix_step(argv, as_released=False)


def native_step(argv: list[str]) -> Step:
    """MaxText's own step as train_compile compiles it, with the config train_sft_native parses."""
    import jax
    from flax.linen import partitioning as nn_partitioning
    from maxtext.configs import pyconfig
    from maxtext.trainers.pre_train import train, train_compile
    from maxtext.utils import maxtext_utils, sharding

    jax.config.update("jax_default_prng_impl", "unsafe_rbg")  # as train_sft_native's main sets it
    spec = importlib.util.find_spec(case_file.LOOPS["native"])
    assert spec is not None and spec.origin is not None, "run this with .maxtext-venv's Python"
    config = pyconfig.initialize([spec.origin, *argv], use_tunix_gradient_accumulation=False)
    jax.config.update("jax_enable_compilation_cache", False)  # no compile-only executables in the real cache
    mesh = train_compile.get_topology_mesh(config)
    started = time.monotonic()
    args, kwargs, state_shardings, _, model = train_compile.get_shaped_inputs(mesh, config)
    step, in_shardings, out_shardings, _, donated = maxtext_utils.get_functional_train_with_signature(
        train.train_step, sharding.get_input_data_sharding(config, mesh), state_shardings, model, config
    )
    with jax.set_mesh(mesh), mesh, nn_partitioning.axis_rules(config.logical_axis_rules):
        jitted = jax.jit(step, in_shardings=in_shardings, out_shardings=out_shardings, donate_argnums=donated)
        compiled = jitted.lower(*args, **kwargs).compile()
    return Step(
        "native",
        state_by_kind(args[0]),
        _memory(compiled),
        _cost(compiled),
        compiled.as_text(),
        time.monotonic() - started,
    )


def f32_converts(hlo: str) -> tuple[int, int]:
    """(how many converts to float32, their bytes), in every computation: fusions' bodies included."""
    found = re.findall(r"= (f32\[[\d,]*\])\S* convert\(", hlo)
    return len(found), sum(hlo_profile.array_bytes(shape) for shape in found)


def held_between_steps(memory: dict[str, int]) -> int:
    """What a chip holds while a step runs, beside its temporaries: the inputs, and the outputs that are not written
    over a donated input (Tunix's new weights, whose old copy is not donated: nnx.jit donates only the optimizer)."""
    return memory["arguments"] + memory["outputs"] - memory["aliased"]


def chip_runs(results: Path) -> dict[str, dict[str, Any]]:
    """What the chip measured for each loop at batch 1 (bench/tpu/run.py's results file), by loop."""
    if not results.is_file():
        return {}
    measured = json.loads(results.read_text())["cases"]
    return {r["case"]["loop"]: r for r in measured if r["case"]["batch"] == 1 and r.get("median_step_ms")}


def _row(label: str, values: list[str], width: int = 52) -> str:
    return f"{label:<{width}}" + "".join(f"{v:>17}" for v in values)


def report(steps: list[Step], chip: dict[str, dict[str, Any]]) -> list[str]:
    names = [s.loop for s in steps]
    lines = ["## State (GiB), array by array in aggregate", _row("", names)]
    kinds = sorted({k for s in steps for k in s.state}, key=lambda k: -max(s.state.get(k, 0) for s in steps))
    for kind in kinds:
        lines.append(_row(kind, [f"{s.state.get(kind, 0) / GIB:.3f}" for s in steps]))
    lines.append(_row("total", [f"{sum(s.state.values()) / GIB:.3f}" for s in steps]))

    lines += ["", "## Compiled step memory (GiB)", _row("", names)]
    for key in ("arguments", "outputs", "aliased", "temporaries"):
        lines.append(_row(key, [f"{s.memory[key] / GIB:.3f}" for s in steps]))
    lines.append(
        _row(
            "held while a step runs: args + outputs - aliased",
            [f"{held_between_steps(s.memory) / GIB:.3f}" for s in steps],
        )
    )
    if chip:
        lines.append(
            _row(
                "chip: in use after step 1 (MaxText's GiB)",
                [str(chip.get(n, {}).get("in_use_after_setup_gb", "-")) for n in names],
            )
        )

    lines += ["", "## Compiled step cost", _row("", names)]
    lines.append(_row("TFLOP (XLA cost analysis)", [f"{s.cost['flops'] / 1e12:.2f}" for s in steps]))
    lines.append(_row("GB accessed (XLA cost analysis)", [f"{s.cost['bytes accessed'] / 1e9:.1f}" for s in steps]))
    lines.append(_row("G transcendentals", [f"{s.cost['transcendentals'] / 1e9:.2f}" for s in steps]))
    profiles = [hlo_profile.profile(s.hlo) for s in steps]
    lines.append(_row("entry instructions", [str(len(p.instructions)) for p in profiles]))
    lines.append(
        _row(
            "estimated ms at 1.5 GHz (kernels w/o estimate: 0)",
            [f"{p.total('cycles') / V5E_CLOCK_HZ * 1e3:.1f}" for p in profiles],
        )
    )
    if chip:
        lines.append(_row("chip: median step ms", [str(chip.get(n, {}).get("median_step_ms", "-")) for n in names]))
    converts = [f32_converts(s.hlo) for s in steps]
    lines.append(
        _row("converts to f32, fusions' bodies too (count, G elements)", [f"{n}, {b / 4e9:.1f}" for n, b in converts])
    )

    lines += ["", "## Estimated ms by part of the step", _row("", names)]
    parts = sorted(
        {i.part for p in profiles for i in p.instructions},
        key=lambda part: -sum(p.total("cycles", part) for p in profiles),
    )
    for part in parts:
        lines.append(_row(part, [f"{p.total('cycles', part) / V5E_CLOCK_HZ * 1e3:.1f}" for p in profiles]))

    lines += ["", "## Instructions by kind: count, estimated ms, GB written", _row("", names)]
    counts = [p.count("opcode") for p in profiles]
    cycles = [p.by("opcode", "cycles") for p in profiles]
    written = [p.by("opcode", "result_bytes") for p in profiles]
    opcodes = sorted(
        {o for c in counts for o in c}, key=lambda o: -max(c[o] for c in cycles) - max(c[o] for c in counts)
    )
    for opcode in opcodes[:18]:
        values = [
            f"{n[opcode]} {c[opcode] / V5E_CLOCK_HZ * 1e3:.1f} {w[opcode] / 1e9:.2f}"
            for n, c, w in zip(counts, cycles, written, strict=True)
        ]
        lines.append(_row(opcode, values))
    lines += [
        "",
        "## Largest differences: part, instruction, largest array written (count, estimated ms)",
        _row("", names),
    ]
    for (part, opcode, largest), groups in differences(profiles)[:14]:
        lines.append(_row(f"{part[:20]} {opcode[:13]} {largest}", [f"{n}, {ms:.1f}" for n, ms in groups], 60))
    return lines


def differences(profiles: list[hlo_profile.Profile]) -> list[tuple[tuple[str, str, str], list[tuple[int, float]]]]:
    """Instructions grouped by the part of the step, their kind and the largest array they write, with the
    count and estimated ms of each group in each step, largest spread first: where one step does what the other
    does not, or does it more slowly."""
    groups: dict[tuple[str, str, str], list[tuple[int, float]]] = {}
    for index, profile in enumerate(profiles):
        for i in profile.instructions:
            key = (i.part, i.opcode, i.largest)
            count, ms = groups.setdefault(key, [(0, 0.0)] * len(profiles))[index]
            groups[key][index] = (count + 1, ms + i.cycles / V5E_CLOCK_HZ * 1e3)
    spread = [(key, values) for key, values in groups.items() if any(ms for _, ms in values)]
    return sorted(spread, key=lambda kv: -(max(ms for _, ms in kv[1]) - min(ms for _, ms in kv[1])))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tunix_gap", description=__doc__.split("\n\n")[0])
    parser.add_argument("--batch", type=int, default=1)
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--topology", default="v5e-1")
    parser.add_argument(
        "--chip",
        type=Path,
        default=Path("bench/tpu/runs/2026-12-05-1/results.json"),
        help="the chip's figures to set beside (a bench/tpu/run.py results file)",
    )
    parser.add_argument("--out", type=Path, help="write the figures as JSON here")
    parser.add_argument("--hlo", type=Path, help="write each compiled step's HLO text into this folder")
    args = parser.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    steps = []
    with tempfile.TemporaryDirectory(prefix="tunix-gap-") as work:
        case = case_file.Case(name="tunix-gap", batch=args.batch, layers=args.layers)
        arguments = case_file.maxtext_arguments(case, work, os.path.join(work, "data.parquet"), work)
        arguments += [f"compile_topology={args.topology}", "compile_topology_num_slices=1"]
        for compile_step in (tunix_step, tunix_what_if, native_step):  # native_step last: it changes JAX's PRNG
            steps.append(compile_step(arguments))
            print(f"compiled {steps[-1].loop}'s step in {steps[-1].seconds:.0f} s", flush=True)
    chip = chip_runs(args.chip) if (args.batch, args.layers) == (1, 4) else {}
    print("\n".join(report(steps, chip)))
    if args.hlo:
        args.hlo.mkdir(parents=True, exist_ok=True)
        for step in steps:
            (args.hlo / f"{step.loop.replace(', ', '-')}.hlo.txt").write_text(step.hlo)
    if args.out:
        figures = {s.loop: {"state": s.state, "memory": s.memory, "cost": s.cost} for s in steps}
        args.out.write_text(json.dumps(figures, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
