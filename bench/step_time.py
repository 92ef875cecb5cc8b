"""python -m bench.step_time: the step-time model (workload/preflight/step_time.py) against what chips measured.

  compile CASES.json --out FILE   compile each case's training step for its topology with libtpu, here, without a
                                  TPU, and record what the step costs each chip (FLOPs, HBM bytes, collectives'
                                  bytes) and MaxText's own count of its FLOPs. Runs in .maxtext-venv; 2-5 min a
                                  case on 2 cores.
  report COSTS.json… [--table F]  predict each case's step from its costs, beside its measured step where a chip
                                  measured one, as a Markdown table for bench/RESULTS.md; with --table, write the
                                  predictions of the cases on a stack's accelerator type for the preview
                                  (infra/pricing/cost.py `STEP_PREDICTIONS`). Standard library.

A case file is `{"cases": [{"case": {…bench/tpu/cases.py Case fields…}, "topology": "v5e-1", "measured_step_ms": 106,
"measured": "where"}, …]}`: the case compiles as the bench's chip runs it (bench/tpu/cases.py `maxtext_arguments`),
the native loop's step as MaxText's `train_compile` compiles it (exactly the step `train_sft_native` runs), the
Tunix loop's as the preflight does (workload/preflight/aot_step.py).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from dataclasses import asdict
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.tpu import cases as case_file
from workload.core.accelerators import ACCELERATORS, Accelerator
from workload.core.config import PipelineConfig
from workload.preflight import step_time

# The lent chip the step times were measured on: not a stack's accelerator type (ACCELERATORS), so named here.
V5E_1 = Accelerator("v5e-1", "ct5lp-hightpu-1t", 1, "1x1", (1, 1, 1), (1, 1, 1), "TPU v5 lite")
TOPOLOGIES = {V5E_1.name: V5E_1, **ACCELERATORS}
FULL_MODEL_LAYERS = 34  # gemma3-4b's decoder layers: a case with fewer is a cut model, for a chip's calibration


def _maxtext_config(case: case_file.Case, topology: str, work: str) -> Any:
    from workload.preflight import aot_step
    from workload.preflight.__main__ import train_sft_file

    argv = case_file.maxtext_arguments(case, work, os.path.join(work, "data.parquet"), work)
    argv += [f"compile_topology={topology}", "compile_topology_num_slices=1"]
    # pyconfig picks the loop's config file by the program's path: the same (post_train/sft.yml) for both loops.
    return aot_step.maxtext_config([train_sft_file(), *argv])


def _native_step(config: Any) -> Any:
    """The step MaxText's own SFT loop runs (pre-training's `train_step`, with the SFT config), compiled as
    `train_compile.main` compiles it."""
    from flax.linen import partitioning as nn_partitioning
    from maxtext.trainers.pre_train import train, train_compile
    from maxtext.utils import maxtext_utils, sharding

    mesh = train_compile.get_topology_mesh(config)
    args, kwargs, state_shardings, _, model = train_compile.get_shaped_inputs(mesh, config)
    data_sharding = sharding.get_input_data_sharding(config, mesh)
    function, in_shardings, out_shardings, static, donated = maxtext_utils.get_functional_train_with_signature(
        train.train_step, data_sharding, state_shardings, model, config
    )
    rules = nn_partitioning.axis_rules(config.logical_axis_rules)
    return train_compile.jit_and_compile(
        function, args, kwargs, mesh, in_shardings, out_shardings, static, donated, config, rules
    )


def _tunix_step(config: Any) -> Any:
    from maxtext.trainers.pre_train import train_compile

    from workload.preflight import aot_step

    compiled, _ = aot_step._compiled(config, train_compile.get_topology_mesh(config), evaluate=False)
    return compiled


def compile_case(entry: dict[str, Any], hlo_dir: Path | None) -> dict[str, Any]:
    from maxtext.utils import maxtext_utils

    case = case_file.Case.from_mapping(entry["case"])
    with tempfile.TemporaryDirectory(prefix="bench-step-time-") as work:
        config = _maxtext_config(case, entry["topology"], work)
        start = time.monotonic()
        compiled = _native_step(config) if case.loop == "native" else _tunix_step(config)
        seconds = time.monotonic() - start
    hlo, analysis = compiled.as_text(), step_time.cost_analysis(compiled)
    if hlo_dir is not None:
        hlo_dir.mkdir(parents=True, exist_ok=True)
        (hlo_dir / f"{case.name}.hlo.txt").write_text(hlo)
    model_tflops, _, _ = maxtext_utils.calculate_tflops_training_per_device(config, log=False)
    return {
        **entry,
        "cost_analysis": analysis,  # XLA's own, each loop's body once: `report --hlo-dir` reads the cost again from it
        "cost": asdict(step_time.cost_of(analysis, hlo)),
        "model_flops": model_tflops * 1e12,
        "tokens_per_step_per_chip": config.per_device_batch_size * config.max_target_length,
        "compile_seconds": round(seconds, 1),
    }


def compile_all(cases: Path, out: Path, only: list[str] | None, hlo_dir: Path | None) -> None:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    import jax

    done = json.loads(out.read_text()) if out.exists() else {"cases": {}}
    done["environment"] = {"date": datetime.now(timezone.utc).isoformat(timespec="seconds"), "jax": jax.__version__}
    for entry in json.loads(cases.read_text())["cases"]:
        name = entry["case"]["name"]
        if only and name not in only:
            continue
        done["cases"][name] = compile_case(entry, hlo_dir)
        print(name, json.dumps(done["cases"][name]["cost"]), flush=True)
        out.write_text(json.dumps(done, indent=1) + "\n")


def prediction(record: dict[str, Any]) -> step_time.StepPrediction:
    cost = step_time.CompiledCost(**record["cost"])
    return step_time.predict(
        cost, TOPOLOGIES[record["topology"]], record["tokens_per_step_per_chip"], record["model_flops"]
    )


def load(costs: list[Path], hlo_dir: Path | None = None) -> dict[str, Any]:
    """Several compile runs' records as one (compiles run in parallel write a file each), the latest date kept; with
    `hlo_dir`, each case's cost read again from XLA's analysis and its kept HLO text, where there is one (the
    reading may have improved since the compile)."""
    files = [json.loads(path.read_text()) for path in costs]
    cases = {name: record for f in files for name, record in f["cases"].items()}
    for name, record in cases.items():
        hlo = None if hlo_dir is None else hlo_dir / f"{name}.hlo.txt"
        if hlo is not None and hlo.exists() and "cost_analysis" in record:
            record["cost"] = asdict(step_time.cost_of(record["cost_analysis"], hlo.read_text()))
    return {"environment": max((f["environment"] for f in files), key=lambda e: e["date"]), "cases": cases}


def report(costs: list[Path], hlo_dir: Path | None) -> str:
    rows = [
        "| case | topology | loop | layers | batch | weights | GFLOP per chip (compiled / MaxText's) | HBM GB | ICI GB "
        "| compute ms | HBM ms | collectives ms | predicted ms | measured ms | predicted / measured | bound "
        "| tokens/s per chip | MFU |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, record in load(costs, hlo_dir)["cases"].items():
        case, cost, p = record["case"], record["cost"], prediction(record)
        measured = record.get("measured_step_ms")
        ratio = f"{p.step_s * 1e3 / measured:.2f}" if measured else ""
        rows.append(
            f"| {name} | {record['topology']} | {case.get('loop', 'tunix')} | {case.get('layers', 4)} "
            f"| {case.get('batch', 1)} | {case.get('weight_dtype', 'bfloat16')} "
            f"| {cost['flops'] / 1e9:,.0f} / {record['model_flops'] / 1e9:,.0f} | {cost['hbm_bytes'] / 1e9:.1f} "
            f"| {sum(cost['collective_bytes'].values()) / 1e9:.1f} | {p.compute_s * 1e3:.0f} | {p.hbm_s * 1e3:.0f} "
            f"| {p.collectives_s * 1e3:.0f} | {p.step_s * 1e3:.0f} | {measured or ''} | {ratio} | {p.bound} "
            f"| {p.tokens_per_s_per_chip:,.0f} | {p.mfu:.1%} |"
        )
    return "\n".join(rows)


def table(costs: list[Path], hlo_dir: Path | None, commit: str) -> dict[str, Any]:
    """The predictions of the cases compiled for a stack's accelerator type with the whole model, as the preview reads
    them (infra/plan/throughput.py): each with the configuration it was compiled with and where it comes from."""
    recorded = load(costs, hlo_dir)
    date = recorded["environment"]["date"][:10]
    rows = []
    for name, record in recorded["cases"].items():
        case = case_file.Case.from_mapping(record["case"])
        if record["topology"] not in ACCELERATORS or case.layers != FULL_MODEL_LAYERS:
            continue
        rows.append(
            {
                "configuration": {
                    "accelerator_type": record["topology"],
                    "model": PipelineConfig.model,
                    "trainer": case.loop,
                    "per_device_batch_size": case.batch,
                    "sequence_length": case.seq,
                    "weight_dtype": case.weight_dtype,
                    "remat_policy": case.remat,
                },
                "step_time": prediction(record).as_dict(),
                "source": f"bench/step_time.py case {name}, compiled {date} at {commit}",
            }
        )
    return {"predictions": rows}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.step_time", description=__doc__.split("\n\n")[0])
    verbs = parser.add_subparsers(dest="verb", required=True)
    compiling = verbs.add_parser("compile")
    compiling.add_argument("cases", type=Path)
    compiling.add_argument("--out", type=Path, required=True)
    compiling.add_argument("--only", action="append", help="compile only this case (repeatable)")
    compiling.add_argument("--hlo-dir", type=Path, help="also write each compiled step's HLO text there")
    reporting = verbs.add_parser("report")
    reporting.add_argument("costs", type=Path, nargs="+")
    reporting.add_argument("--table", type=Path, help="write the preview's table of predictions there")
    reporting.add_argument("--hlo-dir", type=Path, help="read each case's cost again from its HLO text there")
    reporting.add_argument("--commit", default="", help="the commit the costs were compiled at, for the table")
    args = parser.parse_args(argv)
    if args.verb == "compile":
        compile_all(args.cases, args.out, args.only, args.hlo_dir)
    else:
        print(report(args.costs, args.hlo_dir))
        if args.table:
            args.table.write_text(json.dumps(table(args.costs, args.hlo_dir, args.commit), indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
