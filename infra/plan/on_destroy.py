"""What `pulumi destroy` will delete and leave, said while a `pulumi preview` or `pulumi up` can still change it.

`pulumi destroy` does not run the program: it deletes what the state lists, with the deletion flags the last
`pulumi up` recorded. So the one moment the program can warn is the preview and update before it; the same line
stays readable afterwards as the `onDestroy` stack output (`pulumi stack output onDestroy`), which the state keeps
until the destroy.
"""

from __future__ import annotations

from infra.config.settings import Settings
from workload.core.contract import KEPT_PREFIX

KEEPING = "docs/checkpoints.md#keeping-the-data-disk-and-the-bucket"


def published_outside(s: Settings) -> list[str]:
    """Where the publish task copies the kept model to that `pulumi destroy` does not delete: the Hub, or a
    Cloud Storage destination outside the stack's own checkpoint bucket (a destination inside it goes with it)."""
    places = [f"hf.co/{repo}" for repo in s.hub_repos]
    if s.publish_gcs_uri and s.publish_gcs_uri.removeprefix("gs://").split("/", 1)[0] != s.checkpoint_bucket:
        places.append(s.publish_gcs_uri)
    return places


def model_lost_on_destroy(s: Settings) -> str | None:
    """One line, or None: the kept model exists only in what `pulumi destroy` deletes. A slice keeps it in the bucket;
    a VM on its data disk and in the bucket (workload/run/kept.py `copy`), so keeping either keeps the model."""
    if published_outside(s) or s.keeps_bucket:
        return None
    kept = kept_in_bucket(s)
    fetch = "fetch it (scripts/tpu-sft fetch-model, no VM needed)"
    keep = (
        f"keep the bucket (pulumi config set tpu-sft:keepCheckpointBucket true; after the last `pulumi up`: {KEEPING})"
    )
    where, deletes = (
        (f"only in {kept}", "empties and deletes that bucket")
        if s.is_slice
        else (f"on the data disk and in {kept}", "deletes the disk and empties and deletes the bucket")
    )
    return (
        f"the fine-tuned model will be {where}, and `pulumi destroy` {deletes}: {fetch}, publish it "
        f"(scripts/tpu-sft publish, or tpu-sft:publishHubRepo or tpu-sft:publishGcsUri and `pulumi up`: from the "
        f"bucket, no VM needed once the run has finished), or {keep}"
    )


def kept_in_bucket(s: Settings) -> str:
    """Where the kept model is in the stack's bucket: a slice's only copy, the VM's copy of its data disk's."""
    return f"gs://{s.checkpoint_bucket}/{KEPT_PREFIX}/"


def on_destroy(s: Settings) -> str:
    """The `onDestroy` stack output: what `pulumi destroy` leaves, in one line."""
    lost = model_lost_on_destroy(s)
    if lost:
        return lost
    kept = (["the data disk"] if s.keep_data_disk and not s.is_slice else []) + (
        [f"the checkpoint bucket gs://{s.checkpoint_bucket} (the model in {kept_in_bucket(s)})"]
        if s.keeps_bucket
        else []
    )
    if kept:
        return f"`pulumi destroy` leaves {' and '.join(kept)}, billable until you delete them; it deletes the rest"
    return (
        f"`pulumi destroy` deletes everything billable, the bucket with the model in {kept_in_bucket(s)}; the model is "
        f"published to {', '.join(published_outside(s))}"
    )
