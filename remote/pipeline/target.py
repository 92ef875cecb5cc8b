"""The target a pipeline phase is given: the toolkit's `Target` (where and how to connect, remote/ssh/target.py)
and what kind of host it is (`profile`, remote/pipeline/profile.py), one JSON object in $TPU_SFT_TARGET."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Mapping

from remote.pipeline.profile import VM, HostProfile
from remote.ssh.errors import TargetError
from remote.ssh.target import Target


@dataclass(frozen=True)
class PipelineTarget(Target):
    profile: HostProfile = VM  # what kind of host it is (remote/pipeline/profile.py)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.profile, HostProfile):
            raise TargetError("profile", f"{self.profile!r} is not a host profile", 'give "profile" as a JSON object')

    @classmethod
    def _from_json_values(cls, values: dict[str, Any]) -> dict[str, Any]:
        if isinstance(values.get("profile"), Mapping):
            values["profile"] = HostProfile.from_mapping(values["profile"])
        return super()._from_json_values(values)
