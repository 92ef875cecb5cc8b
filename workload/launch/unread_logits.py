"""The logits that Tunix's train step returns and nothing reads, dropped before the step returns them.

MaxText's loss (trainers/pre_train/train.py `loss_fn`) returns the logits in its aux (`intermediate_outputs`),
MaxText 0.2.3's train step (`MaxTextPeftTrainer`, trainers/post_train/sft/train_sft.py 138-141) and Tunix 0.1.7's
eval step (peft_trainer.py 366-368) return that aux as an output, and nothing reads it: `_post_process_train_step`
and `_post_process_eval_step` do nothing, MaxText's SFT hooks never see it.
A step's outputs live in HBM until the loop lets go of them, and with two steps in flight
(`max_inflight_computations=2`) two steps' logits can: float32, batch × sequence × vocabulary, 2.15 GB per sequence
per chip for gemma3-4b (262,144 tokens of vocabulary). Without them in the aux, XLA never materialises them as an
output. The loss and the gradients are the same computation: the aux is not differentiated (`has_aux`).

Runs in the MaxText venv: the trainer's launcher (every trainer) and the preflight's compiled step apply it.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

DROPPED = "intermediate_outputs"  # the logits, and whatever the model sowed beside them


def without_logits(loss_fn: Callable[..., tuple[Any, dict]]) -> Callable[..., tuple[Any, dict]]:
    # wraps: nnx.value_and_grad binds the step's keyword inputs by the loss's own signature, read through it
    @functools.wraps(loss_fn)
    def loss(*args: Any, **kwargs: Any) -> tuple[Any, dict]:
        value, aux = loss_fn(*args, **kwargs)
        return value, {key: item for key, item in aux.items() if key != DROPPED}

    return loss


def drop_from_every_trainer() -> None:
    """Every Tunix trainer given a loss with an aux gets it without the logits: train_sft builds its trainer itself
    (use_maxtext_loss_function → `with_loss_fn(loss, has_aux=True)`), so the launcher can only reach it here."""
    from tunix.sft import peft_trainer

    with_loss_fn = peft_trainer.PeftTrainer.with_loss_fn

    def with_loss_fn_without_logits(self: Any, loss_fn: Callable, has_aux: bool = False) -> Any:
        return with_loss_fn(self, without_logits(loss_fn) if has_aux else loss_fn, has_aux=has_aux)

    peft_trainer.PeftTrainer.with_loss_fn = with_loss_fn_without_logits
