"""Whether Google preempted the stack's VM, from Compute Engine's own record: the zone's operations of type
`compute.instances.preempted` whose target is the VM, as Google's sample "List preemption history of a Google Compute
Engine instance" (compute/docs/samples/compute-preemptible-history) asks for them: `zoneOperations.list` with the filter
`operationType="compute.instances.preempted" AND targetLink="…/instances/NAME"`. Under `tpu-sft:recovery auto` the
VM's group recreated it after each (infra/resources/vm_group.py), so `tpu-sft status` says so beside the run's latest
attempt. With the caller's gcloud token, as remote/stack/vm_state.py asks; unread, it says why, never a guess.
"""

from __future__ import annotations

import urllib.parse
from dataclasses import dataclass
from typing import Callable

from remote.pipeline.capacity import access_token, compute_api
from remote.stack import compute_get

PREEMPTED = "compute.instances.preempted"


@dataclass(frozen=True)
class Preemptions:
    times: tuple[str, ...] = ()  # each preemption's insertTime (RFC 3339), oldest first
    unread: str = ""  # why Compute Engine's record could not be read ("" once read)

    def line(self, name: str, attempt: str | None) -> str | None:
        """One line, or None where there is nothing to say (never preempted); `attempt`: the run's latest on the VM,
        where it was read."""
        if self.unread:
            return f"recovery: whether Google preempted {name} is unknown ({self.unread})"
        if not self.times:
            return None
        count = f"{len(self.times)} time{'s' if len(self.times) > 1 else ''}"
        resumed = f"; the run's latest attempt is {attempt}" if attempt else ""
        return (
            f"recovery: Google preempted {name} {count}, last at {self.times[-1]} ({PREEMPTED}); its group recreated "
            f"it with its data disk{resumed}"
        )


def operations_url(project: str, zone: str, name: str) -> str:
    target = f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}/instances/{name}"
    query = urllib.parse.urlencode({"filter": f'operationType="{PREEMPTED}" AND targetLink="{target}"'})
    return f"{compute_api()}/compute/v1/projects/{project}/zones/{zone}/operations?{query}"


def read(project: str, zone: str, name: str, token: Callable[[], str] | None = None) -> Preemptions:
    """`token`: the caller's gcloud token unless given."""
    try:
        items = compute_get.get(operations_url(project, zone, name), token or access_token).get("items") or []
    except compute_get.Unread as unread:
        return Preemptions(unread=unread.reason)
    return Preemptions(times=tuple(sorted(str(op.get("insertTime", "")) for op in items)))
