"""Fill a flex-start slice's group: `pulumi up` creates it empty, and the first task to reach its hosts resizes it to
the slice's size and waits until Compute Engine has made every host, minutes or hours later, printing a line at
least every minute; the SSH wait's 10 minutes start only once the hosts exist.

Why a plain resize, not a resize request: Compute Engine refuses resize requests in a group of TPU VMs ("Creating
resize requests for managed instance group with TPU is not allowed", a field report of 2026-07-20), and a group with
a TPU accelerator topology must create its hosts in BULK mode (infra/resources/slice.py), all at once or none. The path
reported to work puts FLEX_START in the template, creates the BULK group at size 0, then resizes it to N
(`instanceGroupManagers.resize`; the Compute API reference: "If you increase the size, the group creates new
instances using the current instance template"). A BULK group "waits for the full capacity to become available"
(cloud.google.com/compute/docs/instance-groups/about-bulk-mode) and says why in
`status.bulkInstanceOperation.lastProgressCheck.error` (its v1 representation; the codes it carries, such as
ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS or QUOTA_EXCEEDED, are from a field report, SkyPilot's tests of its TPU
groups, whose fixtures are dated 2026-07-22). How long it waits is Google's to say, so this wait keeps no clock of
its own. Ctrl-C leaves the group as it is; the next `pulumi up` runs the task again, and so waits again.

With the caller's own credentials (`gcloud auth print-access-token`: the gcloud the IAP tunnel needs anyway),
never logged: GET …/instanceGroupManagers/G (`compute.instanceGroupManagers.get`) for its target size, the hosts
made so far (`currentActions.none`, hosts with nothing pending) and the bulk operation's last check, and
POST …/instanceGroupManagers/G/resize?size=N (`compute.instanceGroupManagers.update`) when the target is below N.
$TPU_SFT_COMPUTE_API overrides the API's base URL (tests: a stand-in).
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
from workload.spend.autostop import COMPUTE_API_ENV, DEFAULT_COMPUTE_API

log = logging.getLogger("remote")

POLL_S = 30.0  # two reads a minute: a progress line at least every minute


def compute_api() -> str:
    """The Compute Engine API's base URL: Google's, or a stand-in's in $TPU_SFT_COMPUTE_API."""
    return (os.environ.get(COMPUTE_API_ENV) or DEFAULT_COMPUTE_API).rstrip("/")


class CapacityError(RemoteError):
    """The group cannot be filled, or could not be read; one line that says what to do."""

    exit_code = EXIT_FAILED


@dataclass(frozen=True)
class GroupState:
    target: int  # the group's target size
    hosts: int  # made so far, with nothing pending
    waiting_on: str  # the bulk operation's last check: "CODE: message; …", "" when it reports none


def group_path(project: str, zone: str, group: str) -> str:
    return f"projects/{project}/zones/{zone}/instanceGroupManagers/{group}"


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


def read(path: str, token: str, api: str) -> GroupState:
    group = _call("GET", f"{api}/compute/v1/{path}", token)
    check = ((group.get("status") or {}).get("bulkInstanceOperation") or {}).get("lastProgressCheck") or {}
    errors = (check.get("error") or {}).get("errors", [])
    return GroupState(
        target=int(group.get("targetSize", 0)),
        hosts=int((group.get("currentActions") or {}).get("none", 0)),
        waiting_on="; ".join(f"{e.get('code', '')}: {e.get('message', '')}".strip(": ") for e in errors),
    )


def fill_group(
    path: str,
    size: int,
    *,
    poll_s: float = POLL_S,
    token: Callable[[], str] = access_token,
    api: str | None = None,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> GroupState:
    """Resize the group at `path` to `size` hosts if its target is below that, then wait until it has made them all
    (returns its last reading). Raises `CapacityError` when the target is lowered under the wait (the hosts asked
    for will not come) or the API refuses. A line at every reading; Ctrl-C propagates and touches nothing."""
    api = api.rstrip("/") if api else compute_api()
    name = path.rsplit("/", 1)[1]
    started = clock()
    try:
        now = read(path, token(), api)
        if now.target < size:
            log.info("asking for the slice's %d hosts: resizing group %s from %d to %d", size, name, now.target, size)
            _call("POST", f"{api}/compute/v1/{path}/resize?size={size}", token())
            now = read(path, token(), api)
        while True:
            waited = _duration(clock() - started)
            if now.target < size:
                raise CapacityError(
                    f"group {name}'s target size is {now.target} of the slice's {size} after {waited}: something "
                    "resized it while its hosts were awaited; run `pulumi up` again to ask for them again"
                )
            if now.hosts >= size:
                log.info("group %s has its %d hosts, after %s", name, size, waited)
                return now
            said = f"; Compute Engine: {now.waiting_on}" if now.waiting_on else ""
            log.info("waiting for capacity: group %s, %d of %d hosts, %s waited%s", name, now.hosts, size, waited, said)
            sleep(poll_s)
            now = read(path, token(), api)  # a new token each time: a wait of hours outlives one
    except KeyboardInterrupt:
        log.warning("stopped waiting; group %s stays as it is: the next `pulumi up` waits again", name)
        raise


def _call(method: str, url: str, token: str) -> dict:
    request = urllib.request.Request(
        url, method=method, data=b"" if method == "POST" else None, headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return json.load(answer)
    except urllib.error.HTTPError as e:
        permission = "update" if method == "POST" else "get"
        hint = {
            401: "; run `gcloud auth login`",
            403: f"; your account needs compute.instanceGroupManagers.{permission}",
            404: "; was the slice deleted? run `pulumi up` again",
        }
        raise CapacityError(f"Compute Engine API answered {e.code} to {method} {url}{hint.get(e.code, '')}") from None
    except (urllib.error.URLError, OSError, ValueError) as e:
        raise CapacityError(f"Compute Engine API unreachable at {url} ({type(e).__name__}: {e})") from None


def _duration(seconds: float) -> str:
    minutes, secs = divmod(int(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes} min" if hours else f"{minutes} min {secs} s"
