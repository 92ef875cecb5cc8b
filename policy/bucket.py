"""The checkpoint bucket holds every run's checkpoints, and a slice's kept model: `pulumi destroy` empties and deletes
it by default (infra/bucket.py, `force_destroy`), and so does any change that replaces it (another
`tpu-sft:checkpointBucket`, or a zone in another region): such a change must not pass unless the user said so."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy.replace import lost_to_a_replace


def replace_would_empty(
    name: str,
    props: Mapping[str, Any],
    *,
    protect: bool,
    retain_on_delete: bool,
    replace_allowed: bool,
) -> list[str]:
    holds = props.get("forceDestroy")  # without it Cloud Storage refuses to delete a bucket that holds objects
    lost = (
        f"checkpoint bucket {name} (every run's checkpoints, and a slice's kept model) would be deleted with its "
        "contents"
    )
    return lost_to_a_replace(
        lost if holds else "",
        "keepCheckpointBucket",
        "allowBucketReplace",
        protect=protect,
        retain_on_delete=retain_on_delete,
        replace_allowed=replace_allowed,
    )
