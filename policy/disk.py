"""The data disk holds the fine-tuned model: a replace must not delete it unless the user said so."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy.model import dig
from policy.replace import Holder

ROLE_LABEL = "tpu-sft-role"
DATA_ROLE = "data"


def is_data_disk(props: Mapping[str, Any]) -> bool:
    return dig(props, "labels", ROLE_LABEL) == DATA_ROLE


def _lost(name: str, props: Mapping[str, Any]) -> str:
    return f"data disk {name} (where the fine-tuned model lives) would be deleted" if is_data_disk(props) else ""


DATA_DISK = Holder(_lost, "keepDataDisk", "allowDataDiskReplace")
