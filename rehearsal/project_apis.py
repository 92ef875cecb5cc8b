"""An empty project, as Compute Engine, Cloud Storage, IAM and OS Login answer one: a request to an API that is not
enabled is refused. The mock engine (rehearsal/engine.py) refuses to register a pulumi-gcp resource unless every API it
calls is one an empty project has on (`ON_IN_AN_EMPTY_PROJECT`) or is enabled by a `gcp.projects.Service` the resource
depends on, so that the engine creates the API first.

The refusal is the shape of Google's 403 for a disabled API, as the field reports of hashicorp/terraform-provider-google
#6101 and #11435 (2020, 2022) and GoogleCloudPlatform/k8s-config-connector#135 (2020) quote it: "<API> has not been
used in project <P> before or it is disabled. Enable it by visiting …". Which API each resource type calls is this
stand-in's own table (each service's REST endpoint in the provider's resource documentation), kept apart from
infra/resources/apis.py so that the program's table is checked against it, not against itself. What an empty project has
on is an assumption the README states instead of checking: the two APIs its prerequisites enable by hand.
"""

from __future__ import annotations

from typing import Any, Iterable

SERVICE = "gcp:projects/service:Service"
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
    """`declared`: what was registered so far (type, urn, inputs each); `dependencies`: the URNs this resource
    waits for."""
    waits = set(dependencies)
    enabled = ON_IN_AN_EMPTY_PROJECT | {
        r.inputs.get("service") for r in declared if r.type == SERVICE and r.urn in waits
    }
    for api in sorted(calls(type_token) - enabled):
        raise ValueError(
            f"googleapi: Error 403: {api} has not been used in project {project} before or it is disabled. "
            f"Enable it by visiting https://console.developers.google.com/apis/api/{api}/overview?project={project} "
            "then retry., accessNotConfigured"
        )
