"""The data disk holds the fine-tuned model: a replace must not delete it unless the user said so."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy.model import dig

ROLE_LABEL = "tpu-sft-role"
DATA_ROLE = "data"


def is_data_disk(props: Mapping[str, Any]) -> bool:
    return dig(props, "labels", ROLE_LABEL) == DATA_ROLE


def replace_would_delete(
    name: str,
    props: Mapping[str, Any],
    *,
    protect: bool,
    retain_on_delete: bool,
    replace_allowed: bool,
) -> list[str]:
    """A replace deletes the old disk unless the resource is protected (the replace fails instead) or
    retained on delete (Pulumi forgets the old disk, which keeps its data)."""
    if not is_data_disk(props) or protect or retain_on_delete or replace_allowed:
        return []
    return [
        f"data disk {name} (where the fine-tuned model lives) would be deleted by any change that replaces it: "
        "set tpu-sft:keepDataDisk true to keep it, or tpu-sft:allowDataDiskReplace true to accept the loss"
    ]
