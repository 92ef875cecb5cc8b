"""Waits, bounded, until the APIs `pulumi up` has just enabled answer, and until the VM's network exists: what the
stack's `…-apis-ready` task runs (infra/resources/apis.py) before any resource that calls them is created.

Google enables an API eventually: the enable call returns before the API answers. A maintainer of the provider
pulumi-gcp wraps (hashicorp/terraform-provider-google#2129): "even when the service usage API returns that a service
is enabled, it can't always be used right away"; a first call then gets 403 SERVICE_DISABLED, "If you enabled this API
recently, wait a few minutes for the action to propagate to our systems and retry", and the provider retries no such
error (its `error_retry_predicates.go` has no predicate for it). A new project's `default` network may not exist until
Compute Engine's first request has made it (GoogleCloudPlatform/magic-modules PR #18826, open). So each API is asked
one cheap read, with the caller's gcloud token, every POLL_S seconds until it answers; a 403 that says the API is off,
and a 404 of the network, mean "not yet"; any other refusal ends the wait at once with Google's words.

Input: $TPU_SFT_APIS_READY, JSON: project, network, apis (the API names), account (with OS Login: whose login profile
is read), and optionally wait_s and poll_s.
$TPU_SFT_GOOGLE_APIS replaces every API's base URL (a stand-in; then no token is asked for), and $TPU_SFT_APIS_POLL_S
the seconds between polls (the rehearsal's shorter propagation). Standard library only.
"""

from __future__ import annotations

import json
import os
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass
from typing import Callable, Mapping

from remote.pipeline.capacity import CapacityError, access_token
from workload.core.contract import APIS_READY_ENV as ENV

BASE_ENV = "TPU_SFT_GOOGLE_APIS"
POLL_ENV = "TPU_SFT_APIS_POLL_S"
WAIT_S = 900.0  # Google's "a few minutes", three times over
POLL_S = 10.0
# The words of Google's refusal of a call to an API that is not (yet) on: SERVICE_DISABLED's reason, the older
# accessNotConfigured, and the message's own sentence.
OFF = ("SERVICE_DISABLED", "accessNotConfigured", "has not been used in project")


@dataclass(frozen=True)
class Probe:
    """One read an API answers only once it is on: its base URL and path (project and network filled in)."""

    base: str
    path: str


_BUCKETS = Probe("https://storage.googleapis.com", "/storage/v1/b?project={project}&maxResults=1")
# (API, its probe): Compute Engine's networks.get of the stack's network (so it also waits for `default` to exist),
# Cloud Storage's buckets.list (both of its API names), IAM's projects.roles.list, OS Login's users.getLoginProfile of
# the account the stack's key goes to.
PROBES: dict[str, Probe] = {
    "compute.googleapis.com": Probe(
        "https://compute.googleapis.com", "/compute/v1/projects/{project}/global/networks/{network}"
    ),
    "storage-api.googleapis.com": _BUCKETS,
    "storage.googleapis.com": _BUCKETS,
    "iam.googleapis.com": Probe("https://iam.googleapis.com", "/v1/projects/{project}/roles?pageSize=1"),
    "oslogin.googleapis.com": Probe("https://oslogin.googleapis.com", "/v1/users/{account}/loginProfile"),
}


class NotReady(Exception):
    """The wait ended without every API answering; the message is the one line to show."""


def _answer(url: str, token: str | None) -> tuple[int, str]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, ""
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode("utf-8", "replace")


def pending(status: int, body: str, network: bool) -> bool | None:
    """True: not yet (the API is still off, or the network not yet made); False: it answers; None: refused."""
    if 200 <= status < 300:
        return False
    if status == 403 and any(word in body for word in OFF):
        return True
    if status == 404 and network:
        return True
    return None


def wait(
    request: Mapping[str, object],
    environ: Mapping[str, str] = os.environ,
    answer: Callable[[str, str | None], tuple[int, str]] = _answer,
    clock: Callable[[], float] = time.monotonic,
    sleep: Callable[[float], None] = time.sleep,
) -> list[str]:
    """Polls until every probed API answers; returns the APIs in the order they answered. Raises NotReady."""
    project, network = str(request["project"]), str(request["network"])
    wait_s = float(request.get("wait_s", WAIT_S))  # type: ignore[arg-type]
    poll_s = float(environ.get(POLL_ENV) or request.get("poll_s", POLL_S))  # type: ignore[arg-type]
    base = environ.get(BASE_ENV)
    token = None if base else access_token()
    left = [api for api in request["apis"] if api in PROBES]  # type: ignore[attr-defined]
    answered: list[str] = []
    last: dict[str, str] = {}
    started = clock()
    while True:
        for api in list(left):
            probe = PROBES[api]
            path = probe.path.format(project=project, network=network, account=request.get("account", ""))
            url = (base or probe.base).rstrip("/") + path
            status, body = answer(url, token)
            state = pending(status, body, network=api == "compute.googleapis.com")
            if state is None:
                said = _message(body) or f"HTTP {status}"
                raise NotReady(f"{api} refused a read of project {project}: {said}")
            if state:
                last[api] = "network " + network + " not found" if status == 404 else "the API is not on yet"
            else:
                left.remove(api)
                answered.append(api)
        if not left:
            return answered
        if clock() - started >= wait_s:
            minutes = (clock() - started) / 60
            why = "; ".join(f"{api}: {last[api]}" for api in left)
            raise NotReady(
                f"after {minutes:.0f} min the APIs enabled for project {project} still do not answer ({why}): run "
                f"`pulumi up` again in a few minutes; `gcloud services list --enabled --project {project}` shows them"
            )
        sleep(poll_s)


def _message(body: str) -> str:
    try:
        return str(json.loads(body)["error"]["message"]).splitlines()[0]
    except (ValueError, KeyError, TypeError, IndexError):
        return ""


def main(environ: Mapping[str, str] = os.environ) -> int:
    try:
        request = json.loads(environ[ENV])
        answered = wait(request, environ)
    except KeyError:
        print(f"apis-ready: ${ENV} is not set: give the project, network and APIs as JSON", file=sys.stderr)
        return 2
    except (NotReady, CapacityError) as error:
        print(f"apis-ready: {error}", file=sys.stderr)
        return 1
    print(f"apis-ready: {', '.join(answered) or 'nothing to wait for'} answer")
    return 0


if __name__ == "__main__":
    sys.exit(main())
