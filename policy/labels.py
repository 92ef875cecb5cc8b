"""Labels on billable resources: what cost reports group the bill by."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from policy.model import dig

# app and stack are added by the program itself; owner and cost-center come from tpu-sft:labels.
DEFAULT_REQUIRED = ("app", "stack", "owner", "cost-center")


def missing(name: str, props: Mapping[str, Any], required: Sequence[str] = DEFAULT_REQUIRED) -> list[str]:
    labels = dig(props, "labels", default={})
    absent = [key for key in required if not str(dig(labels, key, default=""))]
    if not absent:
        return []
    return [
        f"{name} lacks the label(s) {', '.join(absent)} that the bill is split by: "
        f"pulumi config set --path tpu-sft:labels.{absent[0]} <value> (and likewise for the others)"
    ]
