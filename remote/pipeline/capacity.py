"""Wait for a flex-start slice's hosts: its resize request makes them all at once, when Compute Engine finds the
capacity, minutes or hours after `pulumi up` created it. The first task to reach the hosts waits here, before any
SSH, printing a line at least every minute; the SSH wait's 10 minutes start only once the hosts exist.

The request's states, as the Compute Engine API reference gives them (InstanceGroupManagerResizeRequest.state,
v1): CREATING, "being created and may still fail creation"; ACCEPTED, "accepted for provisioning when the capacity
becomes available"; SUCCEEDED; FAILED, "failed before or during provisioning" (hosts made meanwhile are rolled
back); CANCELLED. Its v1 representation has no validity or expiry field (kind, id, creationTimestamp, name,
description, zone, resizeBy, requestedRunDuration, state, status, selfLink, selfLinkWithId): how long it stays
ACCEPTED is Google's to say, so the wait keeps no clock of its own and ends when the request does. Ctrl-C leaves
the request as it is; the next `pulumi up` runs the task again, and so waits again.

Read with the caller's own credentials (`gcloud auth print-access-token`: the gcloud the IAP tunnel needs anyway),
never logged: GET …/instanceGroupManagers/G/resizeRequests/R for the state, and GET …/instanceGroupManagers/G for
the hosts made so far (`currentActions.none`, hosts with nothing pending, of `targetSize`); both need
`compute.instanceGroupManagers.get`. $TPU_SFT_COMPUTE_API overrides the API's base URL (tests: a stand-in).
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Callable

from remote.ssh.errors import EXIT_FAILED, RemoteError

log = logging.getLogger("remote")

DEFAULT_COMPUTE_API = "https://compute.googleapis.com"
POLL_S = 30.0  # two reads a minute: a progress line at least every minute
WAITING = ("CREATING", "ACCEPTED")


class CapacityError(RemoteError):
    """The request ended without hosts, or could not be read; one line that says what to do."""

    exit_code = EXIT_FAILED


@dataclass(frozen=True)
class RequestState:
    state: str
    error: str  # the request's own error message(s), "" when it has none
    hosts: int  # made so far
    target: int  # the group's target size


def request_path(project: str, zone: str, group: str, request: str) -> str:
    return f"projects/{project}/zones/{zone}/instanceGroupManagers/{group}/resizeRequests/{request}"


def access_token() -> str:
    """The caller's gcloud access token; its value never enters a message."""
    try:
        done = subprocess.run(
            ["gcloud", "auth", "print-access-token"], capture_output=True, text=True, timeout=60, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as e:
        raise CapacityError(f"cannot ask gcloud for an access token ({type(e).__name__}); install gcloud") from None
    token = done.stdout.strip()
    if done.returncode != 0 or not token:
        said = (done.stderr.strip().splitlines() or ["no output"])[-1]
        raise CapacityError(f"gcloud auth print-access-token failed: {said}; run `gcloud auth login`")
    return token


def read(path: str, token: str, api: str) -> RequestState:
    request = _get(f"{api}/compute/v1/{path}", token)
    group = _get(f"{api}/compute/v1/{path.rsplit('/resizeRequests/', 1)[0]}", token)
    errors = (request.get("status") or {}).get("error", {}).get("errors", [])
    return RequestState(
        state=str(request.get("state", "STATE_UNSPECIFIED")),
        error="; ".join(str(e.get("message", e.get("code", ""))) for e in errors),
        hosts=int((group.get("currentActions") or {}).get("none", 0)),
        target=int(group.get("targetSize", 0)),
    )


def wait_for_capacity(
    path: str,
    *,
    poll_s: float = POLL_S,
    token: Callable[[], str] = access_token,
    api: str | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> RequestState:
    """Until the request at `path` succeeds (returns its last reading) or ends without hosts (raises
    `CapacityError`). A line at every reading; Ctrl-C propagates and touches nothing."""
    api = (api or os.environ.get("TPU_SFT_COMPUTE_API") or DEFAULT_COMPUTE_API).rstrip("/")
    name = path.rsplit("/", 1)[1]
    started = clock()
    try:
        while True:
            now = read(path, token(), api)  # a new token each time: a wait of hours outlives one
            waited = _duration(clock() - started)
            if now.state == "SUCCEEDED":
                log.info("resize request %s SUCCEEDED: %d of %d hosts, after %s", name, now.hosts, now.target, waited)
                return now
            if now.state not in WAITING:
                said = f" ({now.error})" if now.error else ""
                raise CapacityError(
                    f"resize request {name} is {now.state}{said} after {waited}: no hosts will come from it; ask "
                    "again with a new group: pulumi up --replace <the InstanceGroupManager's URN>"
                )
            log.info(
                "waiting for capacity: resize request %s %s, %d of %d hosts, %s waited",
                name,
                now.state,
                now.hosts,
                now.target,
                waited,
            )
            sleep(poll_s)
    except KeyboardInterrupt:
        log.warning("stopped waiting; resize request %s stays as it is: the next `pulumi up` waits again", name)
        raise


def _get(url: str, token: str) -> dict:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as e:
        hint = {
            401: "; run `gcloud auth login`",
            403: "; your account needs compute.instanceGroupManagers.get",
            404: "; was the slice deleted? run `pulumi up` again",
        }
        raise CapacityError(f"Compute Engine API answered {e.code} to GET {url}{hint.get(e.code, '')}") from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise CapacityError(f"Compute Engine API unreachable at {url} ({type(e).__name__}: {e})") from None


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min {secs} s"
