"""The two SFT training loops `tpu-sft:trainer` chooses between, and how each numbers and lays out what it writes.

- `native`: MaxText's own SFT loop (`train_sft_native`; named `train_sft_deprecated` in MaxText 0.2.2),
  MaxText's linen `train_step`, at the speed of its pre-training loop (on a TPU v5e chip 1.41x Tunix's tokens/s at
  the seed's flags, in half the memory: ../shared/tpu/README.md). It checkpoints MaxText's whole TrainState (step,
  parameters, optimizer state) with Orbax under `checkpoints/<step>/items`, and logs the loop's index: the line
  "completed step: 0" follows the first update, and checkpoint `<s>` holds the state after s+1 updates.
- `tunix`: the seed's `train_sft`, Tunix's PeftTrainer. It saves `checkpoints/<step>/model_params` (and the optimizer
  state beside it), and numbers steps by the updates done: "completed step: 1" follows the first update.

Both read the same config file (pyconfig maps either module to `post_train/sft.yml`) and the same argv. The runner
counts in updates done, Tunix's numbering, so that `steps`, the progress line, the held-out curve and the stack
outputs mean the same whichever loop ran: a native step or checkpoint number is shifted by `updates_after`.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TrainerLoop:
    module: str  # what the trainer's launcher runs
    weights_item: str  # the sub-directory of checkpoints/<step>/ that holds the parameters, as to_huggingface loads
    updates_after: int  # updates done = the step number the loop logs or names a checkpoint with + this

    def updates(self, logged_step: int) -> int:
        return logged_step + self.updates_after

    def checkpoint_step(self, updates: int) -> int:
        """The checkpoint directory's number for the state after `updates` updates."""
        return updates - self.updates_after


TRAINER_LOOPS = {
    "native": TrainerLoop("maxtext.trainers.post_train.sft.train_sft_native", "items", 1),
    "tunix": TrainerLoop("maxtext.trainers.post_train.sft.train_sft", "model_params", 0),
}
