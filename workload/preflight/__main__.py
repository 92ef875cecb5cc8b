"""python -m workload.preflight: compile the training step the VM would run, for its TPU, here, without one.

Reads the pipeline's settings JSON (PipelineConfig.to_mapping(), as `python -m workload` takes it), builds the
trainer's MaxText arguments and environment exactly as the pipeline does (workload/run/commands.py, the levers
among them), and compiles the step of the settings' loop (tpu-sft:trainer) for the settings' accelerator type with
libtpu's compile-only topology: MaxText's own loop's with MaxText's train_compile (workload/preflight/native_step.py),
Tunix's with its own trainer's code (workload/preflight/aot_step.py); and its eval step when the run evaluates. The
verdict counts what the loop holds beside the step too (workload/preflight/fit.py `Live`). Needs .maxtext-venv's
Python (MaxText, libtpu); no TPU, no cloud, no Hugging Face token.

It prints one line a person reads (fits or not, GiB per chip against the chip's HBM, the headroom), then a JSON
line: fits, the memory and FLOPs per chip, the compile time, the settings compiled, and lower bounds on step
time, run time and cost. Exit 0: fits; 1: does not fit (the line names the setting to change); 2: bad input.
It leaves nothing behind (MaxText's output directories go to a temporary directory).
"""

from __future__ import annotations

import argparse
import importlib
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
from workload.preflight.step_time import predict
from workload.run import commands, levers
from workload.run.layout import Layout

EXIT_DOES_NOT_FIT = 1
# Each loop's step compiler (tpu-sft:trainer): a module with compile_step(argv) -> compiled.CompiledStep, which raises
# its HbmOom (workload/preflight/compiled.py) when the compiler refuses the step.
STEP_COMPILERS = {"native": "workload.preflight.native_step", "tunix": "workload.preflight.aot_step"}
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
    "sa_block_q",
    "num_vocab_tiling",
    "num_decoder_layers",
)


def train_command(config: PipelineConfig, scratch: str) -> commands.Command:
    """The train step's command as the pipeline builds it (its output directories under `scratch`)."""
    layout = Layout(scratch, scratch, config.model, commands.run_name(config))
    # On a slice every worker runs the same arguments; worker 0 of as many as the accelerator has hosts.
    hosts = ACCELERATORS[config.accelerator_type].hosts
    worker = JaxProcess(0, tuple(f"worker-{i}" for i in range(hosts)))
    return commands.train_sft(config, layout, commands.OnHost(worker=worker))


def _trainer_at(argv: tuple[str, ...]) -> int:
    """Where the trainer's module is in its argv: the first MaxText module, after the launcher's."""
    return next(i for i, arg in enumerate(argv) if arg.startswith("maxtext."))


def maxtext_arguments(config: PipelineConfig, scratch: str, overrides: list[str]) -> list[str]:
    """The trainer's MaxText arguments as the pipeline builds them, then the compile-only topology of the settings'
    accelerator, then `overrides`."""
    argv = train_command(config, scratch).argv
    topology = [f"compile_topology={config.accelerator_type}", "compile_topology_num_slices=1"]
    return [*commands.trainer_arguments(argv), *topology, *overrides]


def module_file(module: str) -> str:
    """pyconfig picks a program's default config (both loops': post_train/sft.yml) from the path in argv[0], which
    under `python -m` is the module's file."""
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise ModuleNotFoundError(f"{module} is not installed: run preflight with .maxtext-venv's Python")
    return spec.origin


def train_sft_file() -> str:
    """train_sft's file: Tunix's loop, whatever the settings say (tests and benches of that loop)."""
    return module_file(commands.TRAIN_SFT)


def trainer_file(config: PipelineConfig) -> str:
    argv = train_command(config, tempfile.gettempdir()).argv
    return module_file(argv[_trainer_at(argv)])


def preflight(config: PipelineConfig, usd_per_chip_hour: float | None, overrides: list[str]) -> tuple[str, dict]:
    """(the line, the JSON record). Imports MaxText: call it in .maxtext-venv."""
    # Only libtpu's compiler is needed: without this, JAX would look for a TPU (and its metadata server) first.
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    # libtpu lets one process per machine hold /tmp/libtpu_lockfile, which guards a TPU; a compile-only topology
    # uses none, so two preflights at once (a sweep beside a preflight, two stacks) must not refuse each other.
    os.environ.setdefault("ALLOW_MULTIPLE_LIBTPU_LOAD", "1")
    # libtpu's flags, as the train step's environment has them (tpu-sft:xlaFlags), before libtpu loads.
    os.environ.update(levers.libtpu_env(config))
    step_compiler = importlib.import_module(STEP_COMPILERS[config.trainer])
    accelerator = ACCELERATORS[config.accelerator_type]
    record: dict = {"accelerator": accelerator.name, "trainer": config.trainer, "overrides": overrides}
    with tempfile.TemporaryDirectory(prefix="tpu-sft-preflight-") as scratch:
        try:
            step = step_compiler.compile_step([trainer_file(config), *maxtext_arguments(config, scratch, overrides)])
        except step_compiler.HbmOom as oom:
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
                "fix": _fix(accelerator.name, oom.config.per_device_batch_size, oom.config.max_target_length),
            }
            return line, record
    # The steps' peaks and what the loop holds beside them (fit.Live), with the chip's margin or a resumed attempt's
    # restored state: the verdict is on all of it.
    used, limit = step.live.needed, step.hbm_limit
    # The compiler refuses most steps that do not fit (HbmOom), but not every one: gemma3-4b on a v6e-16 at
    # batch 8 compiled with a peak of 37.34 GiB a chip of 31.25. Its own memory analysis, with the margin a chip
    # showed (accelerators.CHIP_MARGINS), has the last word.
    fits = used <= limit
    tokens_per_step = step.config.global_batch_size_to_train_on * step.config.max_target_length
    # The step's time on paper (workload/preflight/step_time.py), what a sweep ranks configurations by.
    step_time = predict(step.cost, accelerator, tokens_per_step // accelerator.chips, step.maxtext_flops)
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
        "cost": asdict(step.cost),
        "step_time": step_time.as_dict(),
        "steps": config.steps,
        "tokens_per_step": tokens_per_step,
        "peak_bf16_tflops_per_chip": accelerator.peak_bf16_tflops_per_chip,
        "usd_per_chip_hour": usd_per_chip_hour,
        "bounds": asdict(bounds),
    }
    if not fits:
        batch, sequence = step.config.per_device_batch_size, step.config.max_target_length
        record["fix"] = _fix(accelerator.name, batch, sequence)
        return fit.does_not_fit_line(accelerator.name, used, limit, batch, sequence), record
    return fit.fits_line(accelerator.name, step.live, limit), record


def _fix(accelerator: str, batch: int, sequence: int) -> dict[str, str]:
    """What a step that does not fit asks to change, as its line says: `pulumi up` refuses the stack with it
    (infra/preflight/compile_step.py `refuse_a_known_misfit`)."""
    key, fix = fit.fix_for(accelerator, batch, sequence)
    return {"key": key, "fix": fix}


def _compiled_settings(maxtext_config) -> dict:
    """As JSON values: MaxText's dtypes and enums by their names."""
    values = {key: getattr(maxtext_config, key) for key in COMPILED_SETTINGS}
    return {key: value if isinstance(value, (bool, int, float, str)) else str(value) for key, value in values.items()}


def parser() -> argparse.ArgumentParser:
    top = OneLineParser.from_doc("python -m workload.preflight", __doc__)
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
