"""What Compute Engine says of the stack's VM when SSH does not answer: running, stopped, or gone (autostop deletes
an idle VM, workload/spend/autostop.py; Google may stop or delete a SPOT one). With the caller's gcloud token, as
remote/pipeline/capacity.py asks: GET …/instances/NAME (`compute.instances.get`), and, only on the user's word,
POST …/instances/NAME/start (`compute.instances.start`). $TPU_SFT_COMPUTE_API overrides the API's base URL.
Without gcloud, or refused, the state is "unknown" and the reason says why: never a guess.
"""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Callable

from remote.pipeline.capacity import DEFAULT_COMPUTE_API, CapacityError, access_token
from remote.ssh.errors import EXIT_FAILED, RemoteError

GONE = "gone"
UNKNOWN = "unknown"


class StartRefused(RemoteError):
    exit_code = EXIT_FAILED


@dataclass(frozen=True)
class VmState:
    state: str  # Compute Engine's status (RUNNING, TERMINATED, …), GONE, or UNKNOWN
    reason: str = ""  # for UNKNOWN: why it could not be read

    def line(self, name: str) -> str:
        if self.state == GONE:
            return (
                f"VM {name} is gone (autostop deletes an idle VM; the data disk and bucket stay): "
                "`pulumi up` makes a new one"
            )
        if self.state == UNKNOWN:
            return f"VM {name}: its state is unknown ({self.reason})"
        if self.state in ("TERMINATED", "STOPPED", "SUSPENDED"):
            return f"VM {name} is stopped ({self.state}): `pulumi up` brings a VM back"
        return f"VM {name} is {self.state.lower()} (Compute Engine)"


def _api() -> str:
    return (os.environ.get("TPU_SFT_COMPUTE_API") or DEFAULT_COMPUTE_API).rstrip("/")


def _instance(project: str, zone: str, name: str) -> str:
    return f"{_api()}/compute/v1/projects/{project}/zones/{zone}/instances/{name}"


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


def start(project: str, zone: str, name: str, token: Callable[[], str] = access_token) -> None:
    """Ask Compute Engine to start the stopped VM (it is billed from then on); SSH waits for it afterwards."""
    request = urllib.request.Request(
        f"{_instance(project, zone, name)}/start", headers={"Authorization": f"Bearer {token()}"}, method="POST"
    )
    try:
        with urllib.request.urlopen(request, timeout=60):
            return
    except urllib.error.HTTPError as error:
        raise StartRefused(
            f"Compute Engine refused to start VM {name} ({error.code}; a stopped TPU VM often cannot restart): "
            "run `pulumi up`, which makes a VM with the same data disk"
        ) from None
    except (urllib.error.URLError, OSError) as error:
        raise StartRefused(f"Compute Engine unreachable to start VM {name} ({type(error).__name__}); retry") from None
