"""An empty project, as Compute Engine, Cloud Storage, IAM and OS Login answer one: a request to an API that is not
enabled is refused, and so is one to an API enabled a moment ago. The mock engine (rehearsal/engine.py) refuses to
register a pulumi-gcp resource unless every API it calls is one an empty project has on (`ON_IN_AN_EMPTY_PROJECT`), or
is enabled by a `gcp.projects.Service` the resource waits for (directly or through what it depends on) and has answered
since: the resource waits for a task running remote/pipeline/apis_ready.py (`apis_ready_command`) for that API, which
waits for the Service. Pulumi's engine creates a resource only after everything it depends on is created, and that
task is created only when its command has seen the API answer; that the command really waits out the propagation is
tested against rehearsal/google_apis.py, the stand-in that refuses every call for a while after the enable
(hashicorp/terraform-provider-google#2129, a maintainer: "even when the service usage API returns that a service is
enabled, it can't always be used right away").

The refusal is the shape of Google's 403 for a disabled API, as the field reports of hashicorp/terraform-provider-google
#6101 and #11435 (2020, 2022) and GoogleCloudPlatform/k8s-config-connector#135 (2020) quote it: "<API> has not been
used in project <P> before or it is disabled. Enable it by visiting …". Which API each resource type calls is this
stand-in's own table (each service's REST endpoint in the provider's resource documentation), kept apart from
infra/resources/apis.py so that the program's table is checked against it, not against itself. What an empty project has
on is an assumption the README states instead of checking: the two APIs its prerequisites enable by hand.
"""

from __future__ import annotations

import json
from typing import Any, Iterable

from workload.core.contract import APIS_READY_ENV, apis_ready_command

SERVICE = "gcp:projects/service:Service"
COMMAND = "command:local:Command"
ON_IN_AN_EMPTY_PROJECT = frozenset({"serviceusage.googleapis.com", "cloudresourcemanager.googleapis.com"})
# (type token prefix, the APIs a create of it calls): Compute Engine's v1 REST API; Cloud Storage's JSON API (and the
# storage umbrella API it is listed under); IAM's projects.roles; OS Login's users.importSshPublicKey.
CALLS: tuple[tuple[str, frozenset[str]], ...] = (
    ("gcp:compute/", frozenset({"compute.googleapis.com"})),
    ("gcp:storage/", frozenset({"storage-api.googleapis.com", "storage.googleapis.com"})),
    ("gcp:projects/iAMCustomRole:", frozenset({"iam.googleapis.com"})),
    ("gcp:projects/iAMMember:", frozenset({"cloudresourcemanager.googleapis.com"})),
    ("gcp:oslogin/", frozenset({"oslogin.googleapis.com"})),
)


def calls(type_token: str) -> frozenset[str]:
    return next((apis for prefix, apis in CALLS if type_token.startswith(prefix)), frozenset())


def refuse_a_call_to_a_disabled_api(
    type_token: str, project: str, dependencies: Iterable[str], declared: Iterable[Any]
) -> None:
    """`declared`: what was registered so far (type, urn, inputs and dependencies each); `dependencies`: the URNs this
    resource depends on."""
    by_urn = {r.urn: r for r in declared}
    waits = _waited_for(dependencies, by_urn)
    enabled = {r.inputs.get("service") for r in waits if r.type == SERVICE}
    answered = {api for r in waits for api in _waited_until_answered(r, by_urn)}
    for api in sorted(calls(type_token) - ON_IN_AN_EMPTY_PROJECT):
        if api not in enabled:
            raise ValueError(
                f"googleapi: Error 403: {api} has not been used in project {project} before or it is disabled. "
                "Enable it by visiting "
                f"https://console.developers.google.com/apis/api/{api}/overview?project={project} then retry., "
                "accessNotConfigured"
            )
        if api not in answered:
            raise ValueError(
                f"googleapi: Error 403: {api} has not been used in project {project} before or it is disabled. If you "
                "enabled this API recently, wait a few minutes for the action to propagate to our systems and retry., "
                "SERVICE_DISABLED"
            )


def _waited_for(urns: Iterable[str], by_urn: dict[str, Any]) -> list[Any]:
    """Everything the resource waits for: what it depends on, and what those depend on."""
    seen: dict[str, Any] = {}
    todo = list(urns)
    while todo:
        urn = todo.pop()
        if urn in seen or urn not in by_urn:
            continue
        seen[urn] = by_urn[urn]
        todo.extend(getattr(by_urn[urn], "dependencies", ()))
    return list(seen.values())


def _waited_until_answered(resource: Any, by_urn: dict[str, Any]) -> set[str]:
    """The APIs an apis-ready task waited for, of those it waited to be enabled first."""
    if resource.type != COMMAND or resource.inputs.get("create") != apis_ready_command():
        return set()
    asked = json.loads((resource.inputs.get("environment") or {}).get(APIS_READY_ENV, "{}")).get("apis", [])
    enabled = {r.inputs.get("service") for r in _waited_for(resource.dependencies, by_urn) if r.type == SERVICE}
    return set(asked) & enabled
