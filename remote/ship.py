"""What a phase puts on a host before it starts the job there: the workload code, the HF token, and (export)
the data disk mounted. The same on the VM and on every worker of a slice."""

from __future__ import annotations

from pathlib import Path
from typing import TextIO

from remote.connection import Connection
from remote.errors import BadInput
from remote.mount import MOUNT_WAIT_S, require_mounted
from remote.phase_request import PhaseRequest
from remote.secrets import place_secret
from remote.sync import push_tree
from workload.contract import HF_TOKEN_SECRET

WORKLOAD_DIR = Path(__file__).resolve().parent.parent / "workload"


def code_dir(request: PhaseRequest) -> str:
    return f"{request.target.state_dir}/code"


def prepare(conn: Connection, request: PhaseRequest, hf_token: str | None, out: TextIO, label: str = "") -> bool:
    """Ship workload/ and place the token (a line on `out`, led by `label`, when files changed); returns whether
    the host has the token. Raises `BadInput` when the settings need the token and there is none."""
    pushed = push_tree(conn, WORKLOAD_DIR, f"{code_dir(request)}/workload")
    if pushed.uploaded:
        # One write per line: the workers of a slice are prepared at once.
        out.write(f"{label}shipped workload/ ({len(pushed.uploaded)} files changed)\n")
        out.flush()
    has_token = place_secret(conn, HF_TOKEN_SECRET, hf_token)
    if not has_token and request.pipeline.profile == "full":
        raise BadInput("no HF token on the host and $HF_TOKEN is empty, but the Gemma weights are gated: "
                       f"export HF_TOKEN, or pipe it into `python -m remote put-secret {HF_TOKEN_SECRET}`")
    mount = request.target.profile.required_mount
    if request.phase == "export" and mount is not None:
        require_mounted(conn, mount, MOUNT_WAIT_S)
    return has_token
