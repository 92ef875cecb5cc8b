"""What a replace takes with it: Pulumi deletes the old resource once the new one exists, unless it is protected
(the replace fails instead) or retained on delete (Pulumi forgets the old one, which keeps what it holds). The data
disk (policy/disk.py) and the checkpoint bucket (policy/bucket.py) each hold what a run made; each says what it
would lose, and the user keeps it, or accepts the loss, with a stack setting of its own."""

from __future__ import annotations


def lost_to_a_replace(
    lost: str, keep_key: str, allow_key: str, *, protect: bool, retain_on_delete: bool, replace_allowed: bool
) -> list[str]:
    """`lost`: "<what> would be deleted…" when the resource holds something, "" when it holds nothing to lose."""
    if not lost or protect or retain_on_delete or replace_allowed:
        return []
    return [
        f"{lost} by any change that replaces it: set tpu-sft:{keep_key} true to keep it, or tpu-sft:{allow_key} true "
        "to accept the loss"
    ]
