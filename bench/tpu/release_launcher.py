"""The trainer's launcher for a case that names a MaxText release (a case's `release`): only for the bench.

It keeps only what holds whatever the release: Tunix's patches on Tunix's loop (Tunix 0.1.7 is the one installed,
and their own guards check it), the chips' line and the HBM peak; the launcher's MaxText patches are guarded to the
pinned release's code and refuse another's. Issue 67's cases ran 0.2.3 this way before it was pinned (then
`train_sft.get_tunix_config` and `MetricLogger`'s held-out recording differed from 0.2.2's, and
`train_sft_deprecated` was renamed `train_sft_native`); 0.2.2 runs this way now. Without `checkpoints_as_asked`,
Tunix's loop saves a checkpoint at its last step.

Python 3.11 (the lent chip's): 0.2.3's post-training hooks import `typing.override`, new in 3.12 (the chip said
"ImportError: cannot import name 'override' from 'typing'"), so it is given typing_extensions' own. Nothing else in
its source that the loops import fails to compile on 3.11.

QLoRA: the case's `lora.lora_weight_qtype` is in the argv, and the trainer's launcher quantises the frozen weights
as a pipeline's `tuning: qlora` does (workload/launch/quantised_base.py), whatever `patch_loop` is.
"""

from __future__ import annotations

from workload.launch import model_donation, optimizer_placement, trainer_launcher, unread_logits

TUNIX_LOOP = "maxtext.trainers.post_train.sft.train_sft"


def patch_loop(module: str) -> None:
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


if __name__ == "__main__":
    allow_python_3_11()
    trainer_launcher.main(patch_loop=patch_loop)
