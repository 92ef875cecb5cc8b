"""python -m workload.preflight: compile the training step the VM would run, for its TPU, here, without one.

Reads the pipeline's settings JSON (PipelineConfig.to_mapping(), as `python -m workload` takes it), builds
train_sft's MaxText arguments exactly as the pipeline does (workload/run/commands.py), and compiles Tunix's SFT step
for the settings' accelerator type with libtpu's compile-only topology (workload/preflight/aot_step.py), and its eval
step when the run evaluates; the verdict counts what the loop holds beside the step too (workload/preflight/fit.py
`Live`). Needs .maxtext-venv's Python (MaxText, libtpu); no TPU, no cloud, no Hugging Face token.

It prints one line a person reads (fits or not, GiB per chip against the chip's HBM, the headroom), then a JSON
line: fits, the memory and FLOPs per chip, the compile time, the settings compiled, and lower bounds on step
time, run time and cost. Exit 0: fits; 1: does not fit (the line names the setting to change); 2: bad input.
It leaves nothing behind (MaxText's output directories go to a temporary directory).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
from dataclasses import asdict

from workload.__main__ import load_config
from workload.core import last_resort
from workload.core.accelerators import ACCELERATORS
from workload.core.config import ConfigError, PipelineConfig
from workload.core.contract import EXIT_BAD_INPUT, EXIT_UNEXPECTED
from workload.core.one_line_parser import OneLineParser
from workload.launch.jax_process import JaxProcess
from workload.preflight import fit
from workload.run import commands
from workload.run.layout import Layout

EXIT_DOES_NOT_FIT = 1
# MaxText settings echoed in the JSON line: what the step was compiled with, train_sft's values after MaxText
# applied its defaults (base.yml, post_train/sft.yml, the model's file).
COMPILED_SETTINGS = (
    "model_name",
    "per_device_batch_size",
    "global_batch_size_to_train_on",
    "max_target_length",
    "gradient_accumulation_steps",
    "remat_policy",
    "weight_dtype",
    "dtype",
    "scan_layers",
    "attention",
    "num_decoder_layers",
)


def maxtext_arguments(config: PipelineConfig, scratch: str, overrides: list[str]) -> list[str]:
    """train_sft's MaxText arguments as the pipeline builds them (its output directories under `scratch`), then
    the compile-only topology of the settings' accelerator, then `overrides`."""
    layout = Layout(scratch, scratch, config.model, commands.run_name(config))
    # On a slice every worker runs the same arguments; worker 0 of as many as the accelerator has hosts.
    hosts = ACCELERATORS[config.accelerator_type].hosts
    worker = JaxProcess(0, tuple(f"worker-{i}" for i in range(hosts)))
    argv = commands.train_sft(config, layout, worker=worker).argv
    topology = [f"compile_topology={config.accelerator_type}", "compile_topology_num_slices=1"]
    return [*commands.trainer_arguments(argv), *topology, *overrides]


def train_sft_file() -> str:
    """pyconfig picks a program's default config (train_sft's: post_train/sft.yml) from the path in argv[0], which
    under `python -m` is the module's file."""
    spec = importlib.util.find_spec(commands.TRAIN_SFT)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"{commands.TRAIN_SFT} is not installed: run preflight with .maxtext-venv's Python")
    return spec.origin


def preflight(config: PipelineConfig, usd_per_chip_hour: float | None, overrides: list[str]) -> tuple[str, dict]:
    """(the line, the JSON record). Imports MaxText: call it in .maxtext-venv."""
    # Only libtpu's compiler is needed: without this, JAX would look for a TPU (and its metadata server) first.
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    # libtpu lets one process per machine hold /tmp/libtpu_lockfile, which guards a TPU; a compile-only topology
    # uses none, so two preflights at once (a sweep beside a preflight, two stacks) must not refuse each other.
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    from workload.preflight import aot_step

    accelerator = ACCELERATORS[config.accelerator_type]
    record: dict = {"accelerator": accelerator.name, "overrides": overrides}
    with tempfile.TemporaryDirectory(prefix="tpu-sft-preflight-") as scratch:
        try:
            step = aot_step.compile_step([train_sft_file(), *maxtext_arguments(config, scratch, overrides)])
        except aot_step.HbmOom as oom:
            settings = _compiled_settings(oom.config)
            line = fit.does_not_fit_line(
                accelerator.name, oom.used, oom.limit, oom.config.per_device_batch_size, oom.config.max_target_length
            )
            record |= {
                "fits": False,
                "hbm_bytes_per_chip": oom.used,
                "hbm_limit_bytes_per_chip": oom.limit,
                "compile_seconds": round(oom.seconds, 1),
                "settings": settings,
            }
            return line, record
    # The steps' peaks and what the loop holds beside them (fit.Live), with the chip's margin or a resumed attempt's
    # restored state: the verdict is on all of it.
    used, limit = step.live.needed, step.hbm_limit
    # The compiler refuses most steps that do not fit (aot_step.HbmOom), but not every one: gemma3-4b on a v6e-16 at
    # batch 8 compiled with a peak of 37.34 GiB a chip of 31.25. Its own memory analysis, with the margin a chip
    # showed (fit.CHIP_MARGIN), has the last word.
    fits = used <= limit
    tokens_per_step = step.config.global_batch_size_to_train_on * step.config.max_target_length
    # Two counts of the same step's work, each short of it in its own way: XLA's cost analysis counts a loop's
    # body once (the scanned layers), MaxText's counts no rematerialisation. The larger is the better lower bound.
    bound_flops = max(step.flops, step.maxtext_flops)
    bounds = fit.bounds(
        bound_flops,
        accelerator.peak_bf16_tflops_per_chip,
        tokens_per_step,
        config.steps,
        accelerator.chips,
        usd_per_chip_hour,
    )
    record |= {
        "fits": fits,
        "hbm_bytes_per_chip": used,
        "hbm_limit_bytes_per_chip": limit,
        "memory_per_chip": asdict(step.live.train),
        "eval_memory_per_chip": None if step.live.eval is None else asdict(step.live.eval),
        "live_per_chip": step.live.parts(),
        "flops_per_step_per_chip": bound_flops,
        "compiled_flops_per_step_per_chip": step.flops,
        "maxtext_flops_per_step_per_chip": step.maxtext_flops,
        "compile_seconds": round(step.seconds, 1),
        "settings": _compiled_settings(step.config),
        "steps": config.steps,
        "tokens_per_step": tokens_per_step,
        "peak_bf16_tflops_per_chip": accelerator.peak_bf16_tflops_per_chip,
        "usd_per_chip_hour": usd_per_chip_hour,
        "bounds": asdict(bounds),
    }
    if not fits:
        batch, sequence = step.config.per_device_batch_size, step.config.max_target_length
        return fit.does_not_fit_line(accelerator.name, used, limit, batch, sequence), record
    return fit.fits_line(accelerator.name, step.live, limit), record


def _compiled_settings(maxtext_config) -> dict:
    """As JSON values: MaxText's dtypes and enums by their names."""
    values = {key: getattr(maxtext_config, key) for key in COMPILED_SETTINGS}
    return {key: value if isinstance(value, (bool, int, float, str)) else str(value) for key, value in values.items()}


def parser() -> argparse.ArgumentParser:
    top = OneLineParser(
        prog="python -m workload.preflight",
        description=__doc__.split("\n\n")[0],
        epilog=__doc__.split("\n\n", 1)[1],
        formatter_class=argparse.RawTextHelpFormatter,
    )
    top.add_argument("--settings", required=True, help="settings JSON (PipelineConfig.to_mapping())")
    top.add_argument(
        "--usd-per-chip-hour", type=float, help="price of a chip-hour, for the cost bound (default: no cost bound)"
    )
    top.add_argument(
        "--maxtext",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="a MaxText option added after the pipeline's (tests, experiments: then it is not the run's step)",
    )
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        config = load_config(args.settings)
        if config.profile == "tiny":
            raise ConfigError("tpu-sft:profile", "the tiny profile trains on a CPU, not a TPU", "preflight a full run")
        line, record = preflight(config, args.usd_per_chip_hour, args.maxtext)
        record_line = json.dumps(record)
    except ConfigError as error:
        print(f"preflight: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as error:  # noqa: BLE001  the last resort: one line and a log, never a traceback
        print(f"preflight: {last_resort.report('preflight', error)}", file=sys.stderr)
        return EXIT_UNEXPECTED
    print(line, file=sys.stdout if record["fits"] else sys.stderr)
    print(record_line, flush=True)
    return 0 if record["fits"] else EXIT_DOES_NOT_FIT


if __name__ == "__main__":
    sys.exit(main())
