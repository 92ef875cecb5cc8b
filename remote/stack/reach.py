"""Reaching the stack's VM for a user's command: the stack's own key and target, and, when SSH does not answer, what
Compute Engine says of the VM (remote/stack/vm_state.py), so the one line says what is wrong and what to do."""

from __future__ import annotations

import os

from remote.pipeline.target import PipelineTarget
from remote.ssh.connection import Connection, connect
from remote.ssh.errors import EXIT_BAD_INPUT, EXIT_UNREACHABLE, RemoteError, Unreachable
from remote.ssh.gateway import check_gcloud
from remote.stack import vm_state
from remote.stack.outputs import StackOutputs


class KeyMissing(RemoteError):
    exit_code = EXIT_BAD_INPUT


class VmUnreachable(RemoteError):
    """SSH did not answer; `state` is what Compute Engine says of the VM (None for a slice: not asked)."""

    exit_code = EXIT_UNREACHABLE

    def __init__(self, message: str, state: vm_state.VmState | None):
        self.state = state
        super().__init__(message)


def require_key(target: PipelineTarget) -> None:
    if not os.path.isfile(target.key_path):
        raise KeyMissing(
            f"the stack's SSH private key {target.key_path} is not on this machine: copy it there (mode 0600) from "
            "the machine that ran `pulumi up`, or run this there"
        )


def vm_name(outputs: StackOutputs) -> str:
    return outputs.text("instanceName") or outputs.text("instanceGroupName") or "the VM"


def state_of(outputs: StackOutputs) -> vm_state.VmState | None:
    """What Compute Engine says of a single VM (a slice's hosts are not asked: None)."""
    project, zone, name = (outputs.text(k) for k in ("project", "zone", "instanceName"))
    if not (project and zone and name):
        return None
    return vm_state.read(project, zone, name)


def connect_vm(outputs: StackOutputs, target: PipelineTarget) -> Connection:
    """A connection to the VM (a slice's worker 0), or `VmUnreachable` saying why and what Compute Engine says."""
    require_key(target)
    try:
        check_gcloud(target.gateway)
        return connect(target)
    except Unreachable as error:
        state = state_of(outputs)
        said = state.line(vm_name(outputs)) if state is not None else "a slice's hosts: check them in the console"
        raise VmUnreachable(f"{target.host} does not answer SSH ({error.reason}); {said}", state) from None
