"""What a task puts on a host before it takes the run there: the workload code and the HF token (`ship`, all a
run task needs; on a VM its group recreates, also what a new boot disk resumes from, resume_kit.py), and for a phase
the whole install (train and export) and (export) the data disk mounted (`prepare`). The same on the VM and on every
worker of a slice."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TextIO

from remote.pipeline import resume_kit
from remote.pipeline.bootstrap.scheduler import detached_log, finish_detached, left_running
from remote.pipeline.mount import MOUNT_WAIT_S, require_mounted
from remote.pipeline.request import PhaseRequest
from remote.ssh.connection import Connection
from remote.ssh.errors import BadInput
from remote.ssh.secrets import place_secret
from remote.ssh.sync import push_tree
from workload.core.contract import HF_TOKEN_SECRET

WORKLOAD_DIR = Path(__file__).resolve().parents[2] / "workload"
# Convert runs beside the install steps bootstrap leaves running (bootstrap/spec.py `Step.detached`); the phases
# after it need every step done.
NEEDS_WHOLE_INSTALL = ("train", "export")


def code_dir(request: PhaseRequest) -> str:
    return f"{request.target.state_dir}/code"


def prepare(conn: Connection, request: PhaseRequest, hf_token: str | None, out: TextIO, label: str = "") -> bool:
    """Finish the install (train and export), `ship`, and (export) wait for the mount; returns whether the host has
    the token."""
    if request.phase in NEEDS_WHOLE_INSTALL:
        finish_install(conn, request, out, label)
    has_token = ship(conn, request, hf_token, out, label)
    mount = request.target.profile.required_mount
    if request.phase == "export" and mount is not None:
        require_mounted(conn, mount, MOUNT_WAIT_S)
    return has_token


def ship(conn: Connection, request: PhaseRequest, hf_token: str | None, out: TextIO, label: str = "") -> bool:
    """Ship workload/ and place the token (a line on `out`, led by `label`, when files changed); returns whether the
    host has the token. Raises `BadInput` when the settings need the token and there is none."""
    pushed = push_tree(conn, WORKLOAD_DIR, f"{code_dir(request)}/workload")
    if pushed.uploaded:
        # One write per line: the workers of a slice are prepared at once.
        out.write(f"{label}shipped workload/ ({len(pushed.uploaded)} files changed)\n")
        out.flush()
    has_token = place_secret(conn, HF_TOKEN_SECRET, hf_token)
    if not has_token and request.pipeline.profile == "full":
        raise BadInput(
            "no HF token on the host and $HF_TOKEN is empty, but the Gemma weights are gated: "
            f"export HF_TOKEN, or pipe it into `python -m remote put-secret {HF_TOKEN_SECRET}`"
        )
    resume_kit.keep(conn, request, out, label)  # a VM its group recreates resumes from these
    return has_token


def finish_install(conn: Connection, request: PhaseRequest, out: TextIO, label: str = "") -> None:
    """Wait for the install steps the bootstrap phase left running on this host, running again one that failed
    (whose error then stops this phase). One round trip, none when the install has no detached steps."""
    spec = request.bootstrap_spec()
    unfinished = left_running(conn, spec)
    if unfinished:
        logs = ", ".join(f"{s.name} (log: {detached_log(conn.target, s.name)})" for s in unfinished)
        out.write(f"{label}waiting for the install steps bootstrap left running: {logs}\n")
        out.flush()
        finish_detached(conn, spec, unfinished, stream=sys.stderr)
