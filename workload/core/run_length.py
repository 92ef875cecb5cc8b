"""The run's length in tokens, and the steps MaxText runs for it (ARCHITECTURE.md, "The run's length").

A token here is a sequence position a step trains on: per_device_batch_size x max_target_length on every chip, what
MaxText counts as a step's tokens and what tokens/s per chip and MFU are figures of. Packing fills those positions
with conversations; what it leaves is padding (the data preflight's packing density), and the loss counts only the
completion tokens among them (its completion share). Counted so, a length holds whatever the batch: the same tokens
at twice the batch is half the steps, and MaxText's learning-rate schedule, which is set in steps (base.yml:
`learning_rate_schedule_steps: -1`, i.e. `steps`; warm-up a fraction of it), keeps its shape over the data.

Standard library only: both sides derive the same steps from the same settings.
"""

from __future__ import annotations

import math

# The seed's run: 1,000 steps of one sequence of 2,048 positions on every chip; a run given no length trains as many
# tokens per chip on the stack's accelerator (the tiny profile: of its own shorter sequences).
SEED_STEPS = 1000
SEED_BATCH = 1
MAXTEXT_MAX_TARGET_LENGTH = 2048  # base.yml's, which train_sft keeps unless tpu-sft:maxTargetLength is set
TINY_MAX_TARGET_LENGTH = 128  # the tiny model's sequences: the recipe known to fit the CPU here


def sequence_length(max_target_length: int | None, profile: str) -> int:
    """The positions of one sequence MaxText trains on: the setting, else the profile's default."""
    if max_target_length is not None:
        return max_target_length
    return TINY_MAX_TARGET_LENGTH if profile == "tiny" else MAXTEXT_MAX_TARGET_LENGTH


def default_tokens(chips: int, profile: str) -> int:
    """The seed's 1,000 x 1 x 2,048 tokens on each of the accelerator's chips; the tiny profile's shrunk sequences
    shrink it alike, so that its default stays the seed's 1,000 steps too."""
    return SEED_STEPS * SEED_BATCH * sequence_length(None, profile) * chips


def steps_for(tokens: int, tokens_per_step: int) -> int:
    """Whole steps: a partial last step is trained as a whole one, so the run trains at least the tokens asked and
    less than one step more."""
    return max(1, math.ceil(tokens / tokens_per_step))


def epochs_in_tokens(epochs: float, epoch_tokens: int) -> int:
    """`epochs` passes over data of `epoch_tokens` positions, up to a whole token."""
    return max(1, math.ceil(epochs * epoch_tokens))
