"""python -m bench.tpu.predict CASES.json --out FILE: the preflight's verdict on each case, for the chip it ran on.

Compiles each case's step as `scripts/preflight` does, its loop's (workload/preflight/native_step.py: MaxText's own
loop's with MaxText's train_compile; workload/preflight/aot_step.py: Tunix's train step with MaxText's loss), what the
loop holds beside it counted (workload/preflight/fit.py `Live`), with the case's own MaxText arguments
(bench/tpu/cases.py), for a TPU topology with libtpu's compile-only devices: no TPU needed.
`python -m bench.tpu.run --predictions FILE` sets each verdict beside what the chip did. Runs in .maxtext-venv;
~1 min a case on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.tpu import cases as case_file


def predict(case: case_file.Case, topology: str, work: str) -> dict[str, Any]:
    import importlib

    from workload.preflight import compiled
    from workload.preflight.__main__ import STEP_COMPILERS, module_file

    step_compiler = importlib.import_module(STEP_COMPILERS[case.loop])
    argv = case_file.maxtext_arguments(case, work, os.path.join(work, "data.parquet"), work)
    argv += [f"compile_topology={topology}", "compile_topology_num_slices=1"]
    try:
        step = step_compiler.compile_step([module_file(case_file.LOOPS[case.loop]), *argv])
    except compiled.HbmOom as oom:
        return {"fits": False, "hbm_bytes_per_chip": oom.used, "hbm_limit_bytes_per_chip": oom.limit}
    live = step.live
    return {
        # what MaxText's own loop prints of its compiled step on the chip (print_compiled_memory_stats), to set beside
        "train_arguments_bytes": live.train.arguments,
        "train_temporaries_bytes": live.train.temporaries,
        "fits": live.needed <= step.hbm_limit,  # the preflight's verdict: with the chip's margin, or a resumed attempt
        "hbm_bytes_per_chip": live.total,  # what the compiled steps and the loop add up to, as the chip is measured
        "needed_bytes_per_chip": live.needed,
        "chip_margin": live.margin,  # the loop's (workload/core/accelerators.py CHIP_MARGINS)
        "resumed_bytes_per_chip": live.resumed,
        "hbm_limit_bytes_per_chip": step.hbm_limit,
        "state_bytes": live.state,
        # XLA's count of what the compiled step does (remat's recompute in, a frozen weight's gradient out) and
        # MaxText's (a full fine-tuning step's 6·N·T with no recompute), per chip: the chip's step time turns either
        # into a utilisation
        "compiled_flops": step.flops,
        "maxtext_flops": step.maxtext_flops,
        "compile_seconds": round(step.seconds, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tpu.predict", description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", type=Path)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--only", action="append", help="predict only this case (repeatable)")
    parser.add_argument("--topology", default="v5e-1", help="MaxText's compile_topology (default v5e-1: the lent chip)")
    args = parser.parse_args(argv)
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    import jax

    result: dict[str, Any] = {
        "environment": {
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "topology": args.topology,
            "jax": jax.__version__,
        },
        "cases": {},
    }
    for case in case_file.load(args.cases):
        if args.only and case.name not in args.only:
            continue
        with tempfile.TemporaryDirectory(prefix="tpu-bench-predict-") as work:
            result["cases"][case.name] = predict(case, args.topology, work)
        print(case.name, json.dumps(result["cases"][case.name]), flush=True)
        args.out.write_text(json.dumps(result, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
