"""The target a pipeline phase is given: the toolkit's `Target` (where and how to connect, remote/ssh/target.py)
and what kind of host it is (`profile`, remote/pipeline/profile.py), one JSON object in $TPU_SFT_TARGET."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from remote.pipeline.profile import VM, HostProfile
from remote.ssh.errors import TargetError
from remote.ssh.target import Target

_RESIZE_REQUEST = re.compile(
    r"projects/[a-z][a-z0-9.:-]{0,62}/zones/[a-z0-9-]{1,63}/instanceGroupManagers/[a-z][a-z0-9-]{0,62}"
    r"/resizeRequests/[a-z][a-z0-9-]{0,62}"
)


@dataclass(frozen=True)
class PipelineTarget(Target):
    profile: HostProfile = VM  # what kind of host it is (remote/pipeline/profile.py)
    # A flex-start slice's resize request, projects/P/zones/Z/instanceGroupManagers/G/resizeRequests/R: the hosts
    # exist once it has succeeded (remote/pipeline/capacity.py).
    resize_request: str | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.profile, HostProfile):
            raise TargetError("profile", f"{self.profile!r} is not a host profile", 'give "profile" as a JSON object')
        if self.resize_request is not None and (
            not isinstance(self.resize_request, str) or not _RESIZE_REQUEST.fullmatch(self.resize_request)
        ):
            raise TargetError(
                "resize_request",
                f"{self.resize_request!r} is not a resize request's path",
                'give "projects/P/zones/Z/instanceGroupManagers/G/resizeRequests/R", or omit it',
            )

    @classmethod
    def _from_json_values(cls, values: dict[str, Any]) -> dict[str, Any]:
        if isinstance(values.get("profile"), Mapping):
            values["profile"] = HostProfile.from_mapping(values["profile"])
        return super()._from_json_values(values)
