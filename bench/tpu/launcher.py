"""The trainer's launcher as the bench starts it, on a TPU host's own Python: only for the bench.

    python -m bench.tpu.launcher HOW MODULE ARGS...

HOW is one of LAUNCHES:
- `pinned`: the VM's launcher as it is (workload/launch/trainer_launcher.py, every patch the VM's trainer gets), on
  the pinned MaxText release: every case that names no other release, LoRA and QLoRA included;
- `unpatched`: the same with Tunix's own optimizer placement, which holds the optimizer's state twice for a moment
  (workload/launch/optimizer_placement.py), to show beside the patched launcher what it does;
- `release`: another MaxText release's source (a case's `release`, bench/tpu/cases.py). It keeps only what holds
  whatever the release: Tunix's patches on Tunix's loop (the pinned Tunix is the one installed, and their own guards
  check it), the chips' line and the HBM peak; the launcher's MaxText patches are guarded to the pinned release's code
  and would refuse another's. Without `checkpoints_as_asked`, Tunix's loop saves a checkpoint at its last step.

Whichever HOW, one mend for the host's Python first: MaxText 0.2.3's post-training hooks
(`trainers/post_train/sft/hooks.py`) import `typing.override`, new in Python 3.12, and the lent chip's host runs
3.11.7 ("ImportError: cannot import name 'override' from 'typing'", 2026-12-07), so `typing` is given
typing_extensions' own. Nothing else in its source that the loops import fails to compile on 3.11.
"""

from __future__ import annotations

import sys

from workload.launch import model_donation, optimizer_placement, trainer_launcher, unread_logits

LAUNCHES = ("pinned", "unpatched", "release")
TUNIX_LOOP = "maxtext.trainers.post_train.sft.train_sft"


def patch_another_releases_loop(module: str) -> None:
    if module != TUNIX_LOOP:
        return  # MaxText's own loop: its patches are all MaxText's
    unread_logits.drop_from_every_trainer()
    optimizer_placement.patch_tunix()
    model_donation.patch_tunix()


def allow_python_3_11() -> None:
    import typing

    if not hasattr(typing, "override"):
        import typing_extensions

        typing.override = typing_extensions.override  # type: ignore[attr-defined]


def main() -> None:
    if len(sys.argv) < 3 or sys.argv[1] not in LAUNCHES:
        raise SystemExit(f"usage: python -m bench.tpu.launcher {{{','.join(LAUNCHES)}}} MODULE [ARGS...]")
    how = sys.argv.pop(1)  # the trainer's launcher reads MODULE ARGS... from sys.argv
    allow_python_3_11()
    if how == "pinned":
        trainer_launcher.main()
    elif how == "unpatched":
        trainer_launcher.main(place_optimizer_per_array=False)
    else:
        trainer_launcher.main(patch_loop=patch_another_releases_loop)


if __name__ == "__main__":
    main()
