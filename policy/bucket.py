"""The checkpoint bucket holds every run's checkpoints, and a slice's kept model: `pulumi destroy` empties and deletes
it by default (infra/resources/bucket.py, `force_destroy`), and so does any change that replaces it (another
`tpu-sft:checkpointBucket`, or a zone in another region): such a change must not pass unless the user said so."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from policy.replace import Holder


def _lost(name: str, props: Mapping[str, Any]) -> str:
    if not props.get("forceDestroy"):  # without it Cloud Storage refuses to delete a bucket that holds objects
        return ""
    return (
        f"checkpoint bucket {name} (every run's checkpoints, and a slice's kept model) would be deleted with its "
        "contents"
    )


CHECKPOINT_BUCKET = Holder(_lost, "keepCheckpointBucket", "allowBucketReplace")
