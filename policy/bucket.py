"""The checkpoint bucket holds every run's checkpoints, and a slice's kept model: `pulumi destroy` empties and deletes
it by default (infra/bucket.py, `force_destroy`), and so does any change that replaces it (another
`tpu-sft:checkpointBucket`, or a zone in another region): such a change must not pass unless the user said so."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def replace_would_empty(
    name: str,
    props: Mapping[str, Any],
    *,
    protect: bool,
    retain_on_delete: bool,
    replace_allowed: bool,
) -> list[str]:
    """A replace of a force-destroy bucket deletes its objects unless the resource is protected (the replace fails
    instead) or retained on delete (Pulumi forgets the old bucket, which keeps its objects)."""
    if not props.get("forceDestroy") or protect or retain_on_delete or replace_allowed:
        return []
    return [
        f"checkpoint bucket {name} (every run's checkpoints, and a slice's kept model) would be deleted with its "
        "contents by any change that replaces it: set tpu-sft:keepCheckpointBucket true to keep it, or "
        "tpu-sft:allowBucketReplace true to accept the loss"
    ]
