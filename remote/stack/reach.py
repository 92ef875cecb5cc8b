"""Reaching the stack's VM for a user's command: the stack's own key and target, and, when SSH does not answer, what
Compute Engine says of the VM (remote/stack/vm_state.py), so the one line says what is wrong and what to do.

On a multi-host slice, every worker, in the platform's worker order (each host's metadata,
remote/pipeline/worker_order.py): the run is one job on every worker, and worker 0's, which runs every step, is
the run's log and state."""

from __future__ import annotations

import contextlib
import os
from dataclasses import dataclass
from typing import Callable, TypeVar

from remote.pipeline import worker_order
from remote.pipeline.target import PipelineTarget
from remote.ssh.connection import Connection, connect
from remote.ssh.errors import EXIT_BAD_INPUT, EXIT_UNREACHABLE, RemoteError, Unreachable
from remote.ssh.gateway import check_gcloud
from remote.ssh.hosts import WorkerError, WorkerHost, on_all_or_raise, open_all, workers_of
from remote.stack import vm_state
from remote.stack.outputs import StackOutputs

T = TypeVar("T")


class KeyMissing(RemoteError):
    exit_code = EXIT_BAD_INPUT


class VmUnreachable(RemoteError):
    """SSH did not answer; `state` is what Compute Engine says of the VM (None for a slice: not asked), `ssh` what
    SSH said of one VM ("" where the message says no more of it)."""

    exit_code = EXIT_UNREACHABLE

    def __init__(self, message: str, state: vm_state.VmState | None, ssh: str = ""):
        self.state, self.ssh = state, ssh
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
    """A connection to the VM (`target.host`; `reach` numbers a slice's hosts), or `VmUnreachable` saying why and
    what Compute Engine says."""
    require_key(target)
    try:
        check_gcloud(target.gateway)
        return connect(target)
    except Unreachable as error:
        state = state_of(outputs)
        said = state.line(vm_name(outputs)) if state is not None else "a slice's hosts: check them in the console"
        ssh = f"{target.host} does not answer SSH ({error.reason})"
        raise VmUnreachable(f"{ssh}; {said}", state, ssh) from None


@dataclass(frozen=True)
class Reached:
    """The run's hosts, connected: one VM, or a slice's workers in worker order (`conns[i]` is worker i's). A
    context manager: leaving it closes every connection."""

    workers: tuple[WorkerHost, ...]
    conns: list[Connection]
    target: PipelineTarget  # led by worker 0: where a follow of the run's log reconnects

    @property
    def on_slice(self) -> bool:
        return len(self.workers) > 1

    @property
    def lead(self) -> Connection:
        """Worker 0's: the host whose job runs every step of the run."""
        return self.conns[0]

    def on_each(self, step: Callable[[WorkerHost, Connection], T]) -> list[T]:
        """`step` on every worker at once, in worker order; a slice's first failure is raised naming its worker
        (one VM's, as it is)."""
        if not self.on_slice:
            return [step(self.workers[0], self.lead)]
        return on_all_or_raise(self.workers, lambda w: step(w, self.conns[w.id]))

    def __enter__(self) -> Reached:
        return self

    def __exit__(self, *exc) -> None:
        for conn in self.conns:
            conn.__exit__(*exc)  # a Ctrl-C abandons each connection rather than wait on it


def reach(outputs: StackOutputs, target: PipelineTarget) -> Reached:
    """The VM, or every worker of a slice; `VmUnreachable` where one does not answer."""
    if len(target.hosts) == 1:
        return Reached((WorkerHost(0, target.host),), [connect_vm(outputs, target)], target)
    return _reach_slice(outputs, target)


def _reach_slice(outputs: StackOutputs, target: PipelineTarget) -> Reached:
    """Every host connected, then numbered by its metadata; if the order is not whole, every connection is closed
    and that is the one-line error (remote/pipeline/worker_order.py)."""
    require_key(target)
    check_gcloud(target.gateway)
    placed = workers_of(target)  # the target's order: a guess until each host's metadata has said
    conns = _connect_every(outputs, target, placed)
    with contextlib.ExitStack() as opened:  # each closed as a `with` does if the order fails: abandoned on Ctrl-C
        for conn in conns:
            opened.enter_context(conn)
        workers, ordered = worker_order.by_metadata(placed, conns)
        opened.pop_all()  # kept open: the caller's `with` closes them
    return Reached(workers, ordered, target.led_by(workers[0].host))


def _connect_every(outputs: StackOutputs, target: PipelineTarget, placed: tuple[WorkerHost, ...]) -> list[Connection]:
    """One attempt on each host at once, as for one VM (a user's command waits for no new VM); if one fails, the
    others are closed and its error raised, naming its host alone: its place in the target is no worker id."""
    try:
        return open_all(placed, lambda w: connect(target, w.host))
    except WorkerError as error:
        if isinstance(error.cause, Unreachable):
            raise VmUnreachable(_not_answering(outputs, error.cause), None) from None
        raise error.cause from None


def _not_answering(outputs: StackOutputs, error: Unreachable) -> str:
    group, zone = vm_name(outputs), outputs.text("zone")
    listing = f"gcloud compute instance-groups managed list-instances {group}" + (f" --zone {zone}" if zone else "")
    return (
        f"{error.host} does not answer SSH ({error.reason}); a command on slice {group} needs every host: check "
        f"them with `{listing}`, then try again"
    )
