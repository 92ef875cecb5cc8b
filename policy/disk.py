"""The data disk holds the fine-tuned model: a replace must not delete it unless the user said so."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy.model import dig
from policy.replace import lost_to_a_replace

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
    lost = f"data disk {name} (where the fine-tuned model lives) would be deleted" if is_data_disk(props) else ""
    return lost_to_a_replace(
        lost,
        "keepDataDisk",
        "allowDataDiskReplace",
        protect=protect,
        retain_on_delete=retain_on_delete,
        replace_allowed=replace_allowed,
    )
