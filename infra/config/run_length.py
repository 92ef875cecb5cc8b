"""The run's length as `pulumi preview` shows it (the `runLength` output): the tokens the steps come to, and, where
the length was given in epochs, the data's size it was counted in (docs/run-length.md)."""

from __future__ import annotations

from typing import Any

from infra.config.settings import Settings


def output(settings: Settings) -> dict[str, Any]:
    pipeline, epoch = settings.pipeline, settings.epoch
    shown: dict[str, Any] = {
        "steps": pipeline.steps,
        "tokensPerStep": pipeline.tokens_per_step,
        "tokens": pipeline.steps * pipeline.tokens_per_step,  # a partial last step trained whole
    }
    if epoch is not None:
        counted = "exactly" if epoch.exact else "estimated from a sample"
        shown |= {"epochs": epoch.epochs, "epochTokens": epoch.epoch_tokens, "epochCounted": counted}
    return shown
