"""A bench run's results.json as a Markdown table, for bench/RESULTS.md. Standard library only."""

from __future__ import annotations

from typing import Any

from bench.tpu import packages
from workload.core.accelerators import CHIP_MARGIN

GB = 1e9


def _gb(n: float | None) -> str:
    return "" if n is None else f"{n / GB:.2f}"


def _preflight(record: dict[str, Any]) -> str:
    """The compiled figure, with the chip's margin, and a resumed attempt's, each against the chip's HBM."""
    predicted = record.get("preflight")
    if predicted is None:
        return ""
    limit, compiled = predicted["hbm_limit_bytes_per_chip"], predicted["hbm_bytes_per_chip"]
    if "resumed_bytes_per_chip" not in predicted:  # the compiler refused it
        return f"≥ {_gb(compiled)}: does not fit"
    margin = predicted.get("chip_margin", CHIP_MARGIN)  # files from before issue 54 hold Tunix's cases only
    fresh, resumed = round(compiled * margin), predicted["resumed_bytes_per_chip"]
    return (
        f"{_gb(compiled)}; × {margin} {_gb(fresh)}: {_verdict(fresh, limit)}; "
        f"resumed {_gb(resumed)}: {_verdict(resumed, limit)}"
    )


def _verdict(needed: int, limit: int) -> str:
    return "fits" if needed <= limit else "does not fit"


def _mfu(run: dict[str, Any]) -> str:
    """On MaxText's count of a full training step; a LoRA run's also on LoRA's model FLOPs; with the preflight beside,
    also on XLA's count of the compiled step."""
    if run.get("mfu") is None:
        return ""
    also = [f"LoRA's FLOPs: {run['mfu_on_lora_flops']:.1%}"] if run.get("mfu_on_lora_flops") is not None else []
    if run.get("mfu_on_compiled_flops") is not None:
        also.append(f"XLA's count: {run['mfu_on_compiled_flops']:.1%}")
    return f"{run['mfu']:.1%}" + (f" ({'; '.join(also)})" if also else "")


def _adapter(case: dict[str, Any]) -> list[str]:
    if case.get("lora_rank") is None:
        return []
    quantised = f", {case['lora_weight_qtype']}" if case.get("lora_weight_qtype") else ""
    return [f"LoRA rank {case['lora_rank']}{quantised}"]


def _row(name: str, case: dict[str, Any], run: dict[str, Any], record: dict[str, Any], rates: bool = True) -> str:
    """`rates`: False for a resume case's runs, whose few steps each end in a checkpoint's save."""
    if not rates:
        run = {
            k: v
            for k, v in run.items()
            if k not in ("median_step_ms", "tokens_per_s_per_chip", "tflops_per_chip", "mfu")
        }
    outcome = run.get("outcome", "")
    if run.get("oom_asked_bytes"):
        outcome += f" (asked {run['oom_asked_bytes'] / 2**20:,.0f} MiB)"
    compiled = run.get("maxtext_compiled_gb")
    cells = [
        name,
        case["loop"] + ("" if case["placement"] == "patched" else ", Tunix's own placement"),
        str(case["layers"]),
        str(case["batch"]),
        case["weight_dtype"],
        case["remat"] or "default",
        case["attention"] or "default",
        " ".join([str(case["vocab_tiling"] or 1), *_adapter(case), *case["maxtext"], *case.get("xla_flags", ())]),
        outcome,
        str(run.get("median_step_ms", "")),
        f"{run['tokens_per_s_per_chip']:,}" if "tokens_per_s_per_chip" in run else "",
        str(run.get("tflops_per_chip", "")),
        _mfu(run),
        _gb(run.get("hbm_peak_bytes_per_chip")),
        "" if compiled is None else f"{compiled['arguments']} + {compiled['temp']}",
        _preflight(record),
        str(record.get("measured_over_predicted", "")),
    ]
    return "| " + " | ".join(cells) + " |"


def markdown(results: dict[str, Any]) -> str:
    env = results["environment"]
    lines = [
        f"{env['date']}, commit {env['commit']}, JAX {env['jax']}, Python {env['python']}",
        "",
        "| case | loop | layers | batch | weights | remat | attention | vocab tiling, more | outcome | step ms "
        "| tokens/s per chip | TFLOP/s per chip | MFU | peak HBM, memory_stats (GB) | compiled step, MaxText: args + "
        "temp (GB) | preflight (GB): compiled; with the chip's margin; a resumed attempt | memory_stats / compiled |",
        "|" + "---|" * 17,
    ]
    if "packages" in env:  # from issue 74 on
        lines[1:1] = ["", "The host's, not the lock's: " + (", ".join(packages.differing(env["packages"])) or "none")]
    resumed = []
    for record in results["cases"]:
        case = record["case"]
        if not case["resume"] or "save" not in record:  # a resume case the host refused has no runs
            lines.append(_row(case["name"], case, record, record))
            continue
        lines.append(_row(case["name"] + " (save)", case, record["save"], record, rates=False))
        lines.append(_row(case["name"] + " (resume)", case, record["resume"], record, rates=False))
        resumed.append(
            f"- {case['name']}: {record['outcome']}: the first run logged steps {record['save'].get('steps_logged')}, "
            f"the second {record['resume'].get('steps_logged')}; optimizer counters in the last checkpoint: "
            f"{record['optimizer_counters_at_end']}"
        )
    return "\n".join(lines + ([""] + resumed if resumed else []))
