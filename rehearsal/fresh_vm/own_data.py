"""The user's own conversations: the fresh-VM rehearsal's first `pulumi up` trains on a local JSON Lines file, as a
team's first real one does, not on the tiny profile's built dataset.

The rows are that dataset's own (workload/tiny/assets.py `conversations`: its training and its held-out
conversations), in the `messages` column alone, the shape a team's export has: the tiny tokenizer's vocabulary and
the lengths the tiny model learns from in 20 steps, so the held-out loss stays a measure of learning. They are
written at rehearsal time into its directory (the same rows every time, so the same content hash and the same
objects in the bucket) rather than committed: some 44 KB of generated text. `evalData` holds out a share by the fixed
seed (infra/config/local_data.py), as many rows as the built dataset held out.
"""

from __future__ import annotations

import json
from pathlib import Path

from workload.tiny.assets import SPEC, conversations

ROWS = SPEC["conversations"] + SPEC["held_out"]
HELD_OUT = "15%"  # 8 of the 56 rows, the built dataset's held-out count
FILE = "chats.jsonl"


def write(directory: Path) -> Path:
    path = directory / FILE
    path.write_text("".join(json.dumps({"messages": row["messages"]}) + "\n" for row in conversations(ROWS)))
    return path


def overrides(path: Path) -> dict[str, str]:
    """The stack settings that name the file, as `pulumi config set` would set them."""
    return {"tpu-sft:dataset": str(path), "tpu-sft:evalData": HELD_OUT}
