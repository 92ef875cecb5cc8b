"""Does the compiler's memory analysis say what a real training step takes? Preflight (workload/preflight/aot_step.py)
reads the SFT step's memory from XLA's analysis for a TPU topology; no TPU is here, but on this CPU both can run: the
same step compiled for the CPU (`aot_step.local_step_memory`, the preflight's code with this machine's mesh) and a
real `train_sft` process with the same arguments (workload/run/commands.py), whose resident memory is sampled every
20 ms from /proc.

    .venv/bin/python -m bench.preflight_fidelity [--batches 2 4 8] [--length 256]

The step is the tiny model's with Gemma 3's whole 262,144-token vocabulary (the tiny tokenizer keeps 8,192 of its
pieces) and random weights: its logits are the step's largest buffers, as on a TPU, so batches of sequences of 256
tokens give steps of gigabytes, far above what the process's memory moves by otherwise. What is compared, per
batch: the compiler's sum of the step's parts (arguments + outputs − aliased + temporaries: the CPU's own "peak"
leaves the temporaries out, unlike the TPU's) against the process's peak resident memory. The difference is what the
process holds beside the step (Python, JAX, the input pipeline); that it stays the same at every batch, and that the
peak grows by what the compiled step grows by (the slope, ~1), is the check. The CPU's allocator is not the TPU's:
this checks that the analysis counts the step's buffers, not a TPU's fragmentation.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

from workload.core.config import PipelineConfig
from workload.core.models import MODELS
from workload.preflight.fit import Memory
from workload.run import commands
from workload.run.layout import Layout

REPO = Path(__file__).resolve().parents[1]
MAXTEXT_PYTHON = REPO / ".maxtext-venv" / "bin" / "python"
STEPS = 3
SAMPLE_S = 0.02
# In .maxtext-venv: the program's path first, from which pyconfig picks train_sft's own config, as preflight does.
COMPILE = """
import json, sys
from dataclasses import asdict
from workload.preflight import __main__ as preflight
from workload.preflight import aot_step
print(json.dumps(asdict(aot_step.local_step_memory([preflight.train_sft_file(), *sys.argv[1:]]))))
"""


def rss_bytes(pid: int) -> int | None:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next(int(line.split()[1]) * 1024 for line in f if line.startswith("VmRSS:"))
    except (OSError, StopIteration):
        return None


def real_peak(argv: list[str], env: dict[str, str], cwd: Path) -> int:
    """Runs train_sft, sampling its resident memory; returns its peak."""
    samples: list[int] = []
    steps = 0
    process = subprocess.Popen(argv, env=env, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)

    def sample() -> None:
        while process.poll() is None:
            rss = rss_bytes(process.pid)
            if rss is not None:
                samples.append(rss)
            time.sleep(SAMPLE_S)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    tail: list[str] = []
    for line in process.stdout or []:
        tail = [*tail[-40:], line]
        if "completed step: " in line:
            steps += 1
    process.wait()
    sampler.join()
    if process.returncode != 0 or steps < STEPS:
        raise SystemExit(f"train_sft ended {process.returncode} after {steps} steps:\n{''.join(tail)}")
    return max(samples)


def compiled_memory(train_argv: tuple[str, ...], env: dict[str, str], cwd: Path) -> dict:
    argv = [str(MAXTEXT_PYTHON), "-c", COMPILE, *commands.trainer_arguments(train_argv)]
    done = subprocess.run(argv, cwd=cwd, env=env, check=True, capture_output=True, text=True)
    return json.loads(done.stdout.splitlines()[-1])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, nargs="+", default=[2, 4, 8])
    parser.add_argument("--length", type=int, default=256)
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    rows = []
    with tempfile.TemporaryDirectory(prefix="tpu-sft-fidelity-") as scratch:
        work, out = Path(scratch) / "work", Path(scratch) / "out"
        for batch in args.batches:
            config = PipelineConfig(
                profile="tiny",
                step_count=STEPS,
                per_device_batch_size=batch,
                max_target_length=args.length,
                eval_interval=0,
            )
            settings = Path(scratch) / "settings.json"
            settings.write_text(json.dumps(config.to_mapping()))
            convert = [str(MAXTEXT_PYTHON), "-m", "workload", "run", "--config", str(settings), "--work-dir", str(work)]
            convert += ["--output-dir", str(out), "--until", "convert"]  # once: later batches find it done
            subprocess.run(convert, cwd=REPO, env=env, check=True, stdout=subprocess.DEVNULL)
            layout = Layout(str(work), str(out), config.model, commands.run_name(config))
            train = commands.train_sft(config, layout, commands.OnHost(python=str(MAXTEXT_PYTHON)))
            # the tiny model given its model's whole vocabulary, after its own (MaxText takes the last), random weights
            whole_vocabulary = f"vocab_size={MODELS[config.model].shape['vocab_size']}"
            argv = [a for a in train.argv if not a.startswith("load_parameters_path=")] + [whole_vocabulary]
            train_env = {**env, **train.env}
            compiled = compiled_memory(tuple(argv), train_env, work)
            parts = Memory(**compiled).parts
            peak = real_peak(argv, train_env, work)
            rows.append({"batch": batch, "compiled": compiled, "compiled_parts": parts, "process_peak": peak})
            print(json.dumps(rows[-1]), flush=True)
    gib = 2**30
    print(f"\n| per-device batch × {args.length} | compiled step (sum of parts) | process peak | beside the step |")
    print("|---:|---:|---:|---:|")
    for row in rows:
        parts, peak = row["compiled_parts"] / gib, row["process_peak"] / gib
        print(f"| {row['batch']} | {parts:.2f} GiB | {peak:.2f} GiB | {peak - parts:.2f} GiB |")
    for low, high in itertools.pairwise(rows):
        slope = (high["process_peak"] - low["process_peak"]) / (high["compiled_parts"] - low["compiled_parts"])
        print(
            f"batch {low['batch']} → {high['batch']}: the process's peak grew {slope:.3f}× what the compiled step grew"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
