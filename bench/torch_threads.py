"""Torch's threads on a shared CPU: the tiny profile's before/after answers (workload/measure/samples.py, greedy
generation through transformers) with torch's own thread count and with one thread (what `workload/launch/tpu_env.py`
cpu_env sets), each beside the same number of busy processes, in one run. The tiny profile always shares its cores (a
slice's simulated hosts, the test suite's runs side by side); OpenMP threads spin at each barrier while a sharer holds
the core, which shows as CPU time, not only as wall time.

    .venv/bin/python -m bench.torch_threads [--busy 5]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from workload.launch.tpu_env import cpu_env
from workload.tiny import assets as tiny

REPO = Path(__file__).resolve().parents[1]
MAXTEXT_PYTHON = REPO / ".maxtext-venv" / "bin" / "python"


def child_cpu_s(argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    """The process's own CPU seconds (user + system, its children included once reaped) and its wall seconds."""
    started = time.monotonic()
    with tempfile.TemporaryFile() as stderr:
        process = subprocess.Popen(argv, env=env, cwd=REPO, stdout=subprocess.DEVNULL, stderr=stderr)
        _, status, usage = os.wait4(process.pid, 0)
        process.returncode = os.waitstatus_to_exitcode(status)
        if process.returncode != 0:
            stderr.seek(0)
            raise SystemExit(f"{argv[2]} failed (exit {process.returncode}): {stderr.read().decode()[-2000:]}")
    return usage.ru_utime + usage.ru_stime, time.monotonic() - started


def beside_busy_processes(busy: int, argv: list[str], env: dict[str, str]) -> tuple[float, float]:
    loops = [subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(busy)]
    try:
        return child_cpu_s(argv, env)
    finally:
        for loop in loops:
            loop.kill()
            loop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--busy", type=int, default=5, help="busy processes beside each run (default 5)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONPATH": str(REPO), "HF_HOME": f"{tmp}/hf-home"}
        subprocess.run(
            [str(MAXTEXT_PYTHON), "-m", "workload.tiny.assets", f"{tmp}/tiny"], env=env, check=True, cwd=REPO
        )
        model = f"{tmp}/tiny/{tiny.MODEL_SUBDIR}"
        argv = [
            str(MAXTEXT_PYTHON),
            "-m",
            "workload.measure.samples",
            model,
            model,
            f"{tmp}/samples.md",
            f"{tmp}/samples.json",
        ]
        argv += ["--dataset", f"{tmp}/tiny/{tiny.DATASET_SUBDIR}", "--split", "test_sft", "--column", "messages"]
        tiny_env = {**env, **cpu_env()}  # as the tiny profile runs it
        own_threads = {k: v for k, v in tiny_env.items() if k != "OMP_NUM_THREADS"}
        print(f"workload.measure.samples on the tiny model, beside {args.busy} busy processes, {os.cpu_count()} cores")
        cpu_s = {}
        for label, run_env in (("torch's own threads", own_threads), ("one thread", tiny_env)):
            cpu_s[label], wall_s = beside_busy_processes(args.busy, argv, run_env)
            print(f"  {label:19}: {cpu_s[label]:6.1f} s CPU, {wall_s:6.1f} s wall", flush=True)
        own, one = cpu_s.values()
        print(f"CPU, torch's own threads / one thread: {own / one:.1f}")


if __name__ == "__main__":
    main()
