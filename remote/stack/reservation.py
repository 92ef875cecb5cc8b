"""What Compute Engine says of the reservation a stack names: whether it exists in the stack's zone, and its mode, which
decides the provisioning model that can consume it (infra/config/google_checks.py).

Asked as remote/stack/vm_state.py asks of the VM, with the caller's gcloud token (remote/pipeline/capacity.py
`access_token`, never logged): GET …/projects/P/zones/Z/reservations/NAME (`compute.reservations.get`). The beta API,
because its Reservation carries the mode and v1's does not (the Compute API reference, google-cloud-compute-v1beta
`Reservation.ReservationMode`: "[Output only] Indicates the reservation mode of the reservation"; CALENDAR: "The
delivered reservations terminate at specified endtime along with terminating VMs running on it … Currently offered for
A3+ GPUs and TPUs only"; DEFAULT: "The delivered reservations do not terminate VMs at the end of reservations …
This is default mode", so an absent field reads as DEFAULT). $TPU_SFT_COMPUTE_API overrides the API's base URL
(tests and the rehearsal: rehearsal/compute_standin.py). Without gcloud, or refused, the mode is None and `reason`
says why: never a guess.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from remote.pipeline.capacity import access_token, compute_api
from remote.stack import compute_get

CALENDAR, DEFAULT = "CALENDAR", "DEFAULT"
MISSING = "missing"  # Compute Engine answered 404: no reservation of that name in that project and zone


@dataclass(frozen=True)
class ReservationRead:
    mode: str | None  # CALENDAR, DEFAULT, MISSING, or None where it could not be read
    reason: str = ""  # for None: why it could not be read, in a few words


def where(project: str, zone: str, reservation: str) -> tuple[str, str]:
    """The project and name a `tpu-sft:reservation` value names: its own, or a shared one's
    (`projects/OTHER/reservations/NAME`, as the VM's affinity names a reservation shared with this project)."""
    parts = reservation.split("/")
    if len(parts) == 4 and parts[0] == "projects" and parts[2] == "reservations":
        return parts[1], parts[3]
    return project, reservation


def read(project: str, zone: str, reservation: str, token: Callable[[], str] = access_token) -> ReservationRead:
    owner, name = where(project, zone, reservation)
    url = f"{compute_api()}/compute/beta/projects/{owner}/zones/{zone}/reservations/{name}"
    try:
        found = compute_get.get(url, token)
    except compute_get.Unread as unread:
        return ReservationRead(MISSING) if unread.status == 404 else ReservationRead(None, unread.reason)
    return ReservationRead(str(found.get("reservationMode") or DEFAULT))
