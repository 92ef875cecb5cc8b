"""The target a pipeline phase is given: the toolkit's `Target` (where and how to connect, remote/ssh/target.py)
and what kind of host it is (`profile`, remote/pipeline/profile.py), one JSON object in $TPU_SFT_TARGET."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from remote.pipeline.profile import VM, HostProfile
from remote.ssh.errors import TargetError
from remote.ssh.target import Target

_GROUP = re.compile(r"projects/[a-z][a-z0-9.:-]{0,62}/zones/[a-z0-9-]{1,63}/instanceGroupManagers/[a-z][a-z0-9-]{0,62}")


@dataclass(frozen=True)
class PipelineTarget(Target):
    profile: HostProfile = VM  # what kind of host it is (remote/pipeline/profile.py)
    # A flex-start slice's group, projects/P/zones/Z/instanceGroupManagers/G, created empty: the hosts exist once it
    # is resized to the slice's size and has made them (remote/pipeline/capacity.py).
    flex_start_group: str | None = None
    # On the machine that runs `pulumi up`: where a task writes its whole log, `<task_logs>/<phase>.log`, and prints
    # only its outcome (remote/pipeline/task_log.py); None (a phase run by hand): everything on stdout.
    task_logs: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.profile, HostProfile):
            raise TargetError("profile", f"{self.profile!r} is not a host profile", 'give "profile" as a JSON object')
        if self.flex_start_group is not None and (
            not isinstance(self.flex_start_group, str) or not _GROUP.fullmatch(self.flex_start_group)
        ):
            raise TargetError(
                "flex_start_group",
                f"{self.flex_start_group!r} is not a managed instance group's path",
                'give "projects/P/zones/Z/instanceGroupManagers/G", or omit it',
            )
        if self.task_logs is not None and (not isinstance(self.task_logs, str) or not self.task_logs):
            raise TargetError("task_logs", f"{self.task_logs!r} is not a directory", "give a path, or omit it")

    @classmethod
    def _from_json_values(cls, values: dict[str, Any]) -> dict[str, Any]:
        if isinstance(values.get("profile"), Mapping):
            values["profile"] = HostProfile.from_mapping(values["profile"])
        return super()._from_json_values(values)
