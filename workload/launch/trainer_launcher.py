"""Runs MaxText's SFT trainer as `python -m` does, with this small module left as the process's `__main__`.

MaxText's Hugging Face input pipeline reads through grain, whose data worker is a `spawn`ed Python: it imports the
parent's main module anew before it reads a row. Under `python -m …train_sft` that is the trainer and all it
imports (MaxText, Tunix, TensorFlow, torch: ~9 s of CPU more than the pipeline itself needs), for the training
data and again for every held-out pass, while the step waits for its batch. Started through this module, the
worker imports this module instead, and of MaxText only what unpickling its pipeline needs.

In the tiny profile the data is read in the trainer's own process instead (workload/launch/data_in_process.py).

It also keeps the trainer's steps from returning the logits nobody reads (workload/launch/unread_logits.py), and as the
trainer ends prints the HBM its chips held at their peak (workload/measure/hbm_peak.py).

    python -m workload.launch.trainer_launcher maxtext.trainers.post_train.sft.train_sft ARGS...
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys

from workload.launch import data_in_process


def main() -> None:
    if len(sys.argv) < 2:
        raise SystemExit("usage: python -m workload.launch.trainer_launcher MODULE [ARGS...]")
    module, args = sys.argv[1], sys.argv[2:]
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise SystemExit(f"{module} is not installed here. Fix: run this with the MaxText venv's Python")
    if importlib.util.find_spec("tunix") is not None:  # the trainer is Tunix's: its steps keep no logits
        from workload.launch import unread_logits

        unread_logits.drop_from_every_trainer()
    if os.environ.get(data_in_process.ENV) == "1":
        data_in_process.read_data_in_the_trainers_process()
    # As under `python -m`: MaxText's pyconfig picks the program's default config from the file in argv[0].
    sys.argv = [spec.origin, *args]
    try:
        # alter_sys=False keeps this module in sys.modules["__main__"], which is what a spawned child imports anew.
        runpy.run_module(module, run_name="__main__", alter_sys=False)
    finally:
        _print_hbm_peak()


def _print_hbm_peak() -> None:
    """Only where the trainer started JAX's backend: starting one now, after a failure, could wait on a slice's
    other workers."""
    if "jax" not in sys.modules:
        return
    import jax
    from jax._src import xla_bridge

    from workload.measure import hbm_peak

    if xla_bridge.backends_are_initialized():
        print(hbm_peak.line(jax.local_devices()), flush=True)


if __name__ == "__main__":
    main()
