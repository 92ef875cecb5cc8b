"""What Compute Engine says of the stack's VM when SSH does not answer: running, stopped, or gone (autostop deletes
an idle VM, workload/spend/autostop.py; Google may stop or delete a SPOT one). With the caller's gcloud token, as
remote/pipeline/capacity.py asks: GET …/instances/NAME (`compute.instances.get`); never a start: Compute Engine cannot
restart a TPU VM once stopped, so `pulumi up` replaces it (infra/resources/vm.py REPLACED_WHEN_STOPPED).
$TPU_SFT_COMPUTE_API overrides the API's base URL. Without gcloud, or refused, the state is "unknown" and the reason
says why: never a guess.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Callable

from remote.pipeline.capacity import CapacityError, access_token, compute_api

GONE = "gone"
UNKNOWN = "unknown"
# Compute Engine's statuses of a VM on its way to, or in, a state it cannot leave but by deletion (a TPU VM).
STOPPED = ("STOPPING", "TERMINATED", "STOPPED", "SUSPENDING", "SUSPENDED")


@dataclass(frozen=True)
class VmState:
    state: str  # Compute Engine's status (RUNNING, TERMINATED, …), GONE, or UNKNOWN
    reason: str = ""  # for UNKNOWN: why it could not be read

    @property
    def stopped(self) -> bool:
        return self.state in STOPPED

    def line(self, name: str) -> str:
        if self.state == GONE:
            return (
                f"VM {name} is gone (autostop deletes an idle VM; the data disk and bucket stay): "
                "`pulumi up` makes a new one"
            )
        if self.state == UNKNOWN:
            return f"VM {name}: its state is unknown ({self.reason})"
        if self.stopped:
            return (
                f"VM {name} was stopped ({self.state}) by a person (the console, gcloud) or by Google (host "
                "maintenance, a spot VM's STOP); a TPU VM cannot be restarted: run `pulumi up` to replace it, and the "
                "run resumes from its checkpoint"
            )
        return f"VM {name} is {self.state.lower()} (Compute Engine)"


def _instance(project: str, zone: str, name: str) -> str:
    return f"{compute_api()}/compute/v1/projects/{project}/zones/{zone}/instances/{name}"


def read(project: str, zone: str, name: str, token: Callable[[], str] = access_token) -> VmState:
    try:
        request = urllib.request.Request(_instance(project, zone, name), headers={"Authorization": f"Bearer {token()}"})
        with urllib.request.urlopen(request, timeout=30) as response:
            return VmState(str(json.load(response).get("status", UNKNOWN)))
    except CapacityError as error:
        return VmState(UNKNOWN, str(error))
    except urllib.error.HTTPError as error:
        if error.code == 404:
            return VmState(GONE)
        return VmState(UNKNOWN, f"Compute Engine answered {error.code}")
    except (urllib.error.URLError, OSError, ValueError) as error:
        return VmState(UNKNOWN, f"Compute Engine unreachable: {type(error).__name__}")
