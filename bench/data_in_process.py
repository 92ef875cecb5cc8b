"""The tiny profile's training data read by grain's spawned worker (what a TPU VM does) and in the trainer's own
process (workload/launch/data_in_process.py), in one run: the same tiny training with held-out passes, once each
way, each in a cpuacct cgroup of its own so that the worker's CPU counts wherever it was reaped. Prints the CPU and
wall seconds of both, their ratio, and both runs' losses, which must be equal: the same batches in the same order.

    .venv/bin/python -m bench.data_in_process [--steps 4]   (as root: it makes two cgroups)
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from workload.core.config import PipelineConfig
from workload.launch import data_in_process
from workload.run import commands, events
from workload.run.layout import Layout

REPO = Path(__file__).resolve().parents[1]
MAXTEXT_PYTHON = REPO / ".maxtext-venv" / "bin" / "python"
CPUACCT = Path("/sys/fs/cgroup/cpuacct")


def converted(work: Path, config: dict) -> None:
    settings = work.parent / "settings.json"
    settings.write_text(json.dumps(config))
    argv = [str(MAXTEXT_PYTHON), "-m", "workload", "run", "--config", str(settings)]
    argv += ["--work-dir", str(work), "--output-dir", str(work.parent / "out"), "--until", "convert"]
    done = subprocess.run(argv, cwd=REPO, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"convert failed: {done.stderr[-2000:]}")


def in_cgroup(name: str, argv: list[str], env: dict[str, str]) -> tuple[float, float, str]:
    """CPU seconds of the process and every descendant (the cgroup's count), wall seconds, stdout+stderr."""
    group = CPUACCT / name
    group.mkdir()
    try:
        started = time.monotonic()
        done = subprocess.run(
            argv,
            cwd=REPO,
            env=env,
            capture_output=True,
            text=True,
            preexec_fn=lambda: (group / "cgroup.procs").write_text(str(os.getpid())),
        )
        wall = time.monotonic() - started
        if done.returncode != 0:
            raise SystemExit(f"{name} failed (exit {done.returncode}): {done.stderr[-2000:]}")
        return int((group / "cpuacct.usage").read_text()) / 1e9, wall, done.stdout + done.stderr
    finally:
        _empty(group)
        group.rmdir()


def _empty(group: Path) -> None:
    """A child the trainer did not wait for (grain's last worker) may still be exiting: it goes first."""
    while pids := (group / "cgroup.procs").read_text().split():
        for pid in pids:
            try:
                os.kill(int(pid), signal.SIGKILL)
            except ProcessLookupError:
                pass
        time.sleep(0.1)


def losses(output: str) -> list[tuple[str, int, float | None]]:
    found: list[tuple[str, int, float | None]] = []
    for line in output.splitlines():
        if step := events.parse_step(line):
            found.append(("train", step["step"], step.get("loss")))
        elif held_out := events.parse_eval(line):
            found.append(("held-out", held_out["step"], held_out["eval_loss"]))
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=4)
    args = parser.parse_args()
    settings = {"profile": "tiny", "steps": args.steps, "evalInterval": args.steps // 2, "evalSteps": 2}
    config = PipelineConfig.from_mapping(settings)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "work"
        converted(work, settings)
        results: dict[str, tuple[float, float, str]] = {}
        # The first training compiles its steps into ~/jax_cache, which the later ones read: a warm-up pays it.
        for label, flag in (("warm-up", "1"), ("grain's worker", "0"), ("in the trainer's process", "1")):
            layout = Layout(str(work), str(Path(tmp) / "out"), config.model, f"bench-{len(results)}")
            train = commands.train_sft(config, layout, commands.OnHost(python=str(MAXTEXT_PYTHON)))
            env = {**os.environ, **train.env, data_in_process.ENV: flag}
            results[label] = in_cgroup(f"tpu-sft-bench-data-{os.getpid()}-{len(results)}", list(train.argv), env)
    del results["warm-up"]
    (worker_cpu, worker_wall, worker_out), (own_cpu, own_wall, own_out) = results.values()
    for label, (cpu, wall, _) in results.items():
        print(f"{label}: {cpu:.1f} s CPU, {wall:.1f} s wall")
    print(f"CPU ratio worker / in process: {worker_cpu / own_cpu:.2f}; wall ratio {worker_wall / own_wall:.2f}")
    same = losses(worker_out) == losses(own_out)
    print(f"losses {'equal' if same else 'DIFFER'}: {losses(own_out)}")
    if not same:
        print(f"with the worker: {losses(worker_out)}")
        raise SystemExit(1)


if __name__ == "__main__":
    main()
