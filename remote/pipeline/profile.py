"""What differs between kinds of host, as one value carried inside the target (remote/pipeline/target.py).

The real VM and the rehearsal's local sshd run the same phases; they differ only in these facts: how MaxText
gets installed, where scratch, training runs and kept outputs go, and whether a data disk must be mounted before
anything is kept. How to reach the host (address, port, `gateway`) is the target's own business. Standard library only:
the Pulumi program builds the VM's profile without importing Fabric.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields, replace
from typing import Any, Mapping

from remote.ssh.errors import TargetError
from workload.core.contract import KEPT_DIR, MOUNT_POINT, SCRATCH_DIR


@dataclass(frozen=True)
class HostProfile:
    name: str = "vm"
    scratch_dir: str = SCRATCH_DIR  # the workload's --work-dir
    kept_dir: str = KEPT_DIR  # the workload's --output-dir: what outlives the host (a path, or gs://bucket/prefix)
    # The workload's --kept-copy-dir: where keep copies the model too (gs://bucket/prefix), so that it can be fetched
    # with no VM; None: nowhere (a slice, whose kept_dir is in the bucket already; a host with no bucket).
    kept_copy_dir: str | None = None
    # The workload's --runs-dir: checkpoints that outlive the host (gs://bucket/prefix or a path); None: scratch.
    runs_dir: str | None = None
    required_mount: str | None = MOUNT_POINT  # kept outputs wait until this is mounted; None: nothing to wait for
    # Where on the data disk the run's records, code, read token and install script are kept for a VM its group
    # recreates on a new boot disk (remote/pipeline/resume_kit.py); None: nowhere (a plain VM, a slice's host).
    resume_kit: str | None = None
    # A bootstrap spec (bootstrap/spec.py `BootstrapSpec`, JSON form) replacing the seed's install; None: the seed's.
    bootstrap: Mapping[str, Any] | None = None

    def __post_init__(self) -> None:
        for name in ("name", "scratch_dir", "kept_dir"):
            value = getattr(self, name)
            if not isinstance(value, str) or not value.strip():
                raise TargetError(f"profile.{name}", f"{value!r} is empty or not text", f'set "{name}" in the profile')
        if self.runs_dir is not None and not (str(self.runs_dir).startswith(("gs://", "/")) and len(self.runs_dir) > 5):
            raise TargetError(
                "profile.runs_dir",
                f"{self.runs_dir!r} is neither gs://bucket/prefix nor an absolute path",
                'give "gs://<bucket>/<prefix>", an absolute path, or null',
            )
        if self.kept_copy_dir is not None and not (
            self.kept_copy_dir.startswith("gs://") and len(self.kept_copy_dir) > 5 and self.kept_copy_dir.isprintable()
        ):
            raise TargetError(
                "profile.kept_copy_dir",
                f"{self.kept_copy_dir!r} is not gs://bucket/prefix",
                'give "gs://<bucket>/<prefix>", or null for no copy',
            )
        if self.kept_dir.startswith("gs://"):  # a slice keeps its model in the bucket: its hosts share no disk
            if len(self.kept_dir) <= 5 or not self.kept_dir.isprintable():
                raise TargetError(
                    "profile.kept_dir",
                    f"{self.kept_dir!r} names no bucket",
                    'give "gs://<bucket>/<prefix>" or an absolute path',
                )
            local: tuple[str, ...] = ("scratch_dir",)
        else:
            local = ("scratch_dir", "kept_dir")
        for name in local:  # handed to the workload, which does not start in the home dir
            value = getattr(self, name)
            if not value.startswith("/") or not value.isprintable():
                raise TargetError(
                    f"profile.{name}",
                    f"{value!r} is not an absolute path on the host",
                    f'set "{name}" to an absolute path, e.g. {SCRATCH_DIR}',
                )
        mount = f"{str(self.required_mount).rstrip('/')}/"
        if self.resume_kit is not None and not (self.required_mount and str(self.resume_kit).startswith(mount)):
            raise TargetError(
                "profile.resume_kit",
                f"{self.resume_kit!r} is not an absolute path on a mounted data disk",
                "give a folder under required_mount, or null",
            )
        if self.required_mount is not None and not str(self.required_mount).startswith("/"):
            raise TargetError(
                "profile.required_mount",
                f"{self.required_mount!r} is not an absolute path",
                "give an absolute mount point, or null when no disk must be mounted",
            )
        if self.bootstrap is not None and not isinstance(self.bootstrap, Mapping):
            raise TargetError(
                "profile.bootstrap", "is not a JSON object", 'give {"steps": [...], "env": {...}} or null'
            )

    @classmethod
    def from_mapping(cls, raw: Any) -> "HostProfile":
        if not isinstance(raw, Mapping):
            raise TargetError("profile", f"expected a JSON object, got {type(raw).__name__}", "give a JSON object")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(raw) - known)
        if unknown:
            raise TargetError(f"profile.{unknown[0]}", "is not a profile field", f"use only {', '.join(sorted(known))}")
        return cls(**raw)

    def to_mapping(self) -> dict[str, Any]:
        # Without a copy, as before there was one: a task whose target changes runs again (infra/resources/tasks.py).
        mapping = asdict(self)
        for optional in ("kept_copy_dir", "resume_kit"):
            if mapping[optional] is None:
                del mapping[optional]
        return mapping


# A Compute Engine VM made by the Pulumi program: the seed's install, /dev/shm scratch, the data disk (the program adds
# the bucket: `runs_dir` and `kept_copy_dir`, infra/resources/tasks.py).
VM = HostProfile()


def slice_host(kept_dir: str, runs_dir: str) -> HostProfile:
    """A host of a multi-host slice made by the Pulumi program: the VM's install and scratch, but no data disk (its
    hosts cannot share one read-write), so nothing to wait for before keeping; the kept model and the training
    runs both go to the checkpoint bucket (infra: gs://<bucket>/kept and gs://<bucket>/runs)."""
    return replace(VM, name="slice-host", kept_dir=kept_dir, runs_dir=runs_dir, required_mount=None)
