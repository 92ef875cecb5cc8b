"""A bench run's results.json as a Markdown table, for bench/RESULTS.md. Standard library only."""

from __future__ import annotations

from typing import Any

GB = 1e9


def _gb(n: float | None) -> str:
    return "" if n is None else f"{n / GB:.2f}"


def _preflight(record: dict[str, Any]) -> str:
    predicted = record.get("preflight")
    if predicted is None:
        return ""
    if "error" in predicted:
        return predicted["error"]
    verdict = "fits" if predicted["fits"] else "does not fit"
    return f"{_gb(predicted['hbm_bytes_per_chip'])} ({verdict})"


def _row(name: str, case: dict[str, Any], run: dict[str, Any], record: dict[str, Any]) -> str:
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
        str(case["vocab_tiling"] or 1) + (" " + " ".join(case["maxtext"]) if case["maxtext"] else ""),
        outcome,
        str(run.get("median_step_ms", "")),
        f"{run['tokens_per_s_per_chip']:,}" if "tokens_per_s_per_chip" in run else "",
        str(run.get("tflops_per_chip", "")),
        f"{run['mfu']:.1%}" if run.get("mfu") is not None else "",
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
        "temp (GB) | preflight (GB) | measured / predicted |",
        "|" + "---|" * 17,
    ]
    resumed = []
    for record in results["cases"]:
        case = record["case"]
        if not case["resume"]:
            lines.append(_row(case["name"], case, record, record))
            continue
        lines.append(_row(case["name"] + " (save)", case, record["save"], record))
        lines.append(_row(case["name"] + " (resume)", case, record["resume"], record))
        resumed.append(
            f"- {case['name']}: {record['outcome']}: the first run logged steps {record['save'].get('steps_logged')}, "
            f"the second {record['resume'].get('steps_logged')}; optimizer counters in the last checkpoint: "
            f"{record['optimizer_counters_at_end']}"
        )
    return "\n".join(lines + ([""] + resumed if resumed else []))
