"""Runs MaxText's SFT trainer as `python -m` does, with this small module left as the process's `__main__`.

MaxText's Hugging Face input pipeline reads through grain, whose data worker is a `spawn`ed Python: it imports the
parent's main module anew before it reads a row. Under `python -m …train_sft` that is the trainer and all it
imports (MaxText, Tunix, TensorFlow, torch: ~9 s of CPU more than the pipeline itself needs), for the training
data and again for every held-out pass, while the step waits for its batch. Started through this module, the
worker imports this module instead, and of MaxText only what unpickling its pipeline needs.

In the tiny profile the data is read in the trainer's own process instead (workload/launch/data_in_process.py).

It also mends what MaxText's and Tunix's pinned code does wrong for this project, each patch guarded to the code it
was written for (workload/launch/pinned_code.py), and each applied to the loop it mends (workload/core/trainer_loop.py).
Tunix's loop (`train_sft`): its steps return no logits that nobody reads (unread_logits.py), it places the optimizer's
state without holding it twice (optimizer_placement.py), a run that asks for no checkpoints writes none
(checkpoints_as_asked.py), and LoRA's random keys reach the mesh on a slice (lora_keys_across_hosts.py). MaxText's
own loop (`train_sft_native`) needs none of those: its linen step returns no logits, it places its state inside
`jit`, and it makes no checkpoint manager unless asked; it gets its held-out pass before the first update
(native_held_out.py), and its checkpoint folder in a bucket is checked by writing there (bucket_folders.py). It
prints which chips the trainer runs on as soon as MaxText has started JAX (workload/measure/devices.py), and as the
trainer ends the HBM they held at their peak (workload/measure/hbm_peak.py).

    python -m workload.launch.trainer_launcher maxtext.trainers.post_train.sft.train_sft ARGS...
"""

from __future__ import annotations

import importlib.util
import os
import runpy
import sys
from typing import Callable

from workload.launch import data_in_process, quantised_base


def main(place_optimizer_per_array: bool = True, patch_loop: Callable[[str], None] | None = None) -> None:
    """`place_optimizer_per_array` False keeps Tunix's own placement: only the TPU bench asks for that, to show
    what it does (bench/tpu/launcher.py `unpatched`). `patch_loop`, given the module, replaces the loops' patches:
    only the TPU bench's runs of another MaxText release, which those patches' guards refuse
    (bench/tpu/launcher.py `release`)."""
    if len(sys.argv) < 2:
        raise SystemExit("usage: python -m workload.launch.trainer_launcher MODULE [ARGS...]")
    module, args = sys.argv[1], sys.argv[2:]
    args, qtype = quantised_base.take(args)  # QLoRA's key, which MaxText 0.2.3 refuses
    spec = importlib.util.find_spec(module)
    if spec is None or spec.origin is None:
        raise SystemExit(f"{module} is not installed here. Fix: run this with the MaxText venv's Python")
    if importlib.util.find_spec("maxtext") is not None:
        _patch_maxtext(module, place_optimizer_per_array, patch_loop)
        if qtype is not None:
            quantised_base.patch(qtype)
    if os.environ.get(data_in_process.ENV) == "1":
        data_in_process.read_data_in_the_trainers_process()
    # As under `python -m`: MaxText's pyconfig picks the program's default config from the file in argv[0].
    sys.argv = [spec.origin, *args]
    try:
        # alter_sys=False keeps this module in sys.modules["__main__"], which is what a spawned child imports anew.
        runpy.run_module(module, run_name="__main__", alter_sys=False)
    finally:
        _print_hbm_peak()


def _patch_maxtext(module: str, place_optimizer_per_array: bool, patch_loop: Callable[[str], None] | None) -> None:
    from maxtext.utils import max_utils

    from workload.core.trainer_loop import TRAINER_LOOPS
    from workload.launch import (
        bucket_folders,
        checkpoints_as_asked,
        lora_keys_across_hosts,
        model_donation,
        native_held_out,
        optimizer_placement,
        unread_logits,
    )

    if patch_loop is not None:
        patch_loop(module)
    elif module == TRAINER_LOOPS["native"].module:
        native_held_out.patch()
        bucket_folders.patch()
    else:  # Tunix's loop, and whatever else runs Tunix's trainer (the TPU bench's cases)
        unread_logits.drop_from_every_trainer()
        if place_optimizer_per_array:
            optimizer_placement.patch_tunix()
        model_donation.patch_tunix()
        checkpoints_as_asked.patch()
        lora_keys_across_hosts.patch_tunix()
    print_system_information = max_utils.print_system_information

    def print_system_information_and_devices() -> None:
        print_system_information()  # starts JAX's backend: the devices are known from here on
        import jax

        from workload.measure import devices

        print(devices.line(jax.local_devices()), flush=True)

    max_utils.print_system_information = print_system_information_and_devices


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
