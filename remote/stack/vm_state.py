"""What Compute Engine says of the stack's VM when SSH does not answer: running, being restarted by Google, stopped
for good, or gone (autostop deletes an idle VM, workload/spend/autostop.py; Google may stop or delete a SPOT one).
With the caller's gcloud token, as remote/pipeline/capacity.py asks: GET …/instances/NAME (`compute.instances.get`),
its `status` and `scheduling.automaticRestart`; which case each is: workload/core/instance_status.py, the table the
program's `pulumi up` decides by too (infra/resources/vm_status.py). Never a start: a person cannot start a stopped
TPU VM, so `pulumi up` replaces it. $TPU_SFT_COMPUTE_API overrides the API's base URL. Without gcloud, or refused,
the state is "unknown" and the reason says why: never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from remote.pipeline.capacity import access_token, compute_api
from remote.stack import compute_get
from workload.core.instance_status import GOING_DOWN, google_brings_it_back, stopped_for_good

GONE = "gone"
UNKNOWN = "unknown"
RESUMES = "the run resumes from its last checkpoint"  # what a caller that has not read the bucket can say


@dataclass(frozen=True)
class VmState:
    state: str  # Compute Engine's status (RUNNING, TERMINATED, …), GONE, or UNKNOWN
    reason: str = ""  # for UNKNOWN: why it could not be read
    automatic_restart: bool = True  # the API's default, off for Spot and flex-start (infra/resources/vm.py)

    @property
    def stopped(self) -> bool:
        """Stopped for good: only a new VM (`pulumi up`) runs the run again."""
        return stopped_for_good(self.state)

    def line(self, name: str, resumes: str = RESUMES) -> str:
        """One line: which case it is and what happens next; `resumes` says from where a new VM resumes the run."""
        if self.state == GONE:
            return (
                f"VM {name} is gone (autostop deletes an idle VM; the data disk and bucket stay): "
                "`pulumi up` makes a new one"
            )
        if self.state == UNKNOWN:
            return f"VM {name}: its state is unknown ({self.reason})"
        if google_brings_it_back(self.state, self.automatic_restart):
            return f"VM {name}: Google is restarting it ({self.state}): the run resumes by itself"
        if self.stopped:
            return f"VM {name} stopped for good ({self.state}): `pulumi up` replaces it; {resumes}"
        if self.state in GOING_DOWN:  # no automatic restart: it comes to rest, and is replaced then
            return (
                f"VM {name} stopped for good ({self.state}, no automatic restart): `pulumi up` replaces it once it has "
                f"stopped; {resumes}"
            )
        return f"VM {name} is {self.state.lower()} (Compute Engine)"


def _instance(project: str, zone: str, name: str) -> str:
    return f"{compute_api()}/compute/v1/projects/{project}/zones/{zone}/instances/{name}"


def read(project: str, zone: str, name: str, token: Callable[[], str] = access_token) -> VmState:
    try:
        instance = compute_get.get(_instance(project, zone, name), token)
    except compute_get.Unread as unread:
        return VmState(GONE) if unread.status == 404 else VmState(UNKNOWN, unread.reason)
    restarts = (instance.get("scheduling") or {}).get("automaticRestart", True)
    return VmState(str(instance.get("status", UNKNOWN)), automatic_restart=restarts is not False)
