"""What a replace takes with it: Pulumi deletes the old resource once the new one exists, unless it is protected
(the replace fails instead) or retained on delete (Pulumi forgets the old one, which keeps what it holds). The data
disk (policy/disk.py) and the checkpoint bucket (policy/bucket.py) each hold what a run made; each says what it
would lose, and the user keeps it, or accepts the loss, with a stack setting of its own."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Holder:
    """A resource that holds what a run made, and its two stack settings: one keeps it, one accepts the loss."""

    lost: Callable[[str, Mapping[str, Any]], str]  # of a name and props: "<what> would be deleted…", or "" when
    # the resource holds nothing to lose
    keep_key: str
    allow_key: str

    def lost_to_a_replace(
        self, name: str, props: Mapping[str, Any], *, protect: bool, retain_on_delete: bool, replace_allowed: bool
    ) -> list[str]:
        lost = self.lost(name, props)
        if not lost or protect or retain_on_delete or replace_allowed:
            return []
        return [
            f"{lost} by any change that replaces it: set tpu-sft:{self.keep_key} true to keep it, or "
            f"tpu-sft:{self.allow_key} true to accept the loss"
        ]
