"""`tpu-sft:epochs` as tokens: the training data's size, which `scripts/preflight --data` counts and keeps, times
the epochs (docs/run-length.md).

The size is kept as .tpu-sft/preflight/data-size-<key>.json, the key a fingerprint of what decides it: the model
(its tokenizer), the profile, the data and its held-out part (local files by their content, as `pulumi up` names
their copies), the splits and columns, the chat template and `maxTargetLength` (packing's sequences). Neither the
run's length nor its batch is in the key: the same data is the same size at any batch.

`pulumi up` (infra/config/read_settings.py `from_pulumi`) and `scripts/preflight` read the stack's config through
`epochs_as_tokens` before anything else parses it: `epochs` becomes `tokens`, so every phase, the plan and the VM see
the length in tokens, and a changed data size is a changed length. Without a kept size, `epochs` is refused in one
line, before anything is created.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

from infra.config.local_data import resolve
from workload.core.config import NAMESPACE, ConfigError, PipelineConfig, set_hint, stack_key
from workload.core.run_length import epochs_in_tokens, sequence_length
from workload.run.fingerprint import fingerprint

CACHE = Path(".tpu-sft") / "preflight"  # beside the data preflight's findings (infra/preflight/data_preflight.py)
# The pipeline keys the data's size depends on; evalInterval only so that a file dataset without evalData parses.
SIZE_KEYS = ("model", "profile", "dataset", "trainSplit", "trainDataColumns", "chatTemplate", "evalData")
_PARSED_WITH = SIZE_KEYS + ("maxTargetLength", "evalInterval")
# Local files are named by their content, as `pulumi up` names their copies; the bucket in those names is not the
# data's, so any name serves.
_CONTENT_NAMES = "data-size"


@dataclass(frozen=True)
class EpochSize:
    """What `tpu-sft:epochs` was counted in: the data's tokens, exactly or estimated, and the record that says so."""

    epochs: float
    epoch_tokens: int
    exact: bool
    record: str

    @property
    def tokens(self) -> int:
        return epochs_in_tokens(self.epochs, self.epoch_tokens)


def size_key(pipeline: PipelineConfig) -> str:
    named = resolve(pipeline, _CONTENT_NAMES).pipeline.to_mapping()
    sequence = sequence_length(pipeline.max_target_length, pipeline.profile)
    return fingerprint({key: named[key] for key in SIZE_KEYS} | {"sequence": sequence, "check": "data size"})


def record_path(pipeline: PipelineConfig) -> Path:
    return CACHE / f"data-size-{size_key(pipeline)}.json"


def keep(pipeline: PipelineConfig, epoch_tokens: int | None, exact: bool) -> None:
    """Keep what a data preflight counted (nothing, when it could not count)."""
    if epoch_tokens is None:
        return
    path = record_path(pipeline)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps({"epoch_tokens": epoch_tokens, "exact": exact}) + "\n")
    temporary.replace(path)  # whole or not at all: `pulumi up` reads it


def data_settings(raw: Mapping[str, Any]) -> PipelineConfig:
    """The pipeline settings of the stack's config that its data's size depends on, and its length, parsed alone
    (two forms of the length are refused here as everywhere)."""
    given = {key: raw.get(stack_key(key)) for key in (*_PARSED_WITH, "epochs", "tokens", "steps")}
    return PipelineConfig.from_mapping({key: value for key, value in given.items() if value is not None})


def epochs_as_tokens(raw: Mapping[str, Any]) -> tuple[dict[str, Any], EpochSize | None]:
    """The stack's config (fully qualified keys) with `tpu-sft:epochs` turned into `tpu-sft:tokens`, and the size it
    was counted in; as it is, and None, without epochs."""
    epochs_key = stack_key("epochs")
    if raw.get(epochs_key) is None:
        return dict(raw), None
    data = data_settings(raw)
    assert data.epochs is not None  # from_mapping parsed the key this function was given
    path = record_path(data)
    try:
        kept = json.loads(path.read_text())
    except FileNotFoundError:
        raise ConfigError(
            epochs_key,
            f"counts passes over the training data, whose size no scripts/preflight --data of this data kept ({CACHE})",
            f"run scripts/preflight --data, or pulumi config rm {epochs_key}; {set_hint('tokens', '16384000')}",
        ) from None
    size = EpochSize(data.epochs, kept["epoch_tokens"], kept["exact"], str(path))
    rest = {key: value for key, value in raw.items() if key != epochs_key}
    return rest | {f"{NAMESPACE}:tokens": str(size.tokens)}, size
