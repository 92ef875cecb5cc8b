"""An empty project runs the program: the stack enables every API it calls (infra/resources/apis.py), each resource
waits for the APIs it calls, and `pulumi destroy` turns none of them off. The mock engine's stand-in for such a project
(rehearsal/project_apis.py) refuses a resource that calls an API neither on in an empty project nor enabled first.

Sources, field reports rather than Google's text, read through the search tool on 2026-12-05: Google's 403 for a
disabled API, "<API> has not been used in project <P> before or it is disabled", as quoted in
hashicorp/terraform-provider-google#6101 ("Enabling the Cloud Resource Manager API requires the Cloud Resource
Manager API", 2020) and #11435 (2022), and GoogleCloudPlatform/k8s-config-connector#135 (2020: "cloudresourcemanager
API needs to be enabled on the project using gcloud or Google Cloud Console before using serviceusage"). pulumi-gcp's
`Service.disable_on_destroy` (the provider's project-service resource): false leaves the API on when the resource is
destroyed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

import pytest

from infra.resources import apis
from rehearsal import project_apis
from workload.core.contract import APIS_READY_ENV, apis_ready_command

SERVICE = "gcp:projects/service:Service"
COMMAND = "command:local:Command"
DISK = "gcp:compute/disk:Disk"


@dataclass
class Registered:
    type: str
    urn: str
    inputs: dict
    dependencies: list[str] = field(default_factory=list)


COMPUTE = Registered(SERVICE, "urn:compute", {"service": "compute.googleapis.com"})
READY = Registered(
    COMMAND,
    "urn:ready",
    {"create": apis_ready_command(), "environment": {APIS_READY_ENV: json.dumps({"apis": ["compute.googleapis.com"]})}},
    ["urn:compute"],
)


def test_the_stand_in_refuses_a_call_to_an_api_not_enabled_first():
    with pytest.raises(ValueError, match="compute.googleapis.com has not been used in project p.*accessNotConfigured"):
        project_apis.refuse_a_call_to_a_disabled_api(DISK, "p", [], [COMPUTE, READY])
    # What an empty project has on needs nothing declared: Cloud Resource Manager, for a project IAM binding.
    project_apis.refuse_a_call_to_a_disabled_api("gcp:projects/iAMMember:IAMMember", "p", [], [])


def test_the_stand_in_refuses_a_call_made_as_soon_as_the_enable_returned():
    """terraform-provider-google#2129: an API enabled a moment ago does not answer yet (SERVICE_DISABLED)."""
    with pytest.raises(ValueError, match="If you enabled this API recently, wait a few minutes.*SERVICE_DISABLED"):
        project_apis.refuse_a_call_to_a_disabled_api(DISK, "p", ["urn:compute"], [COMPUTE, READY])
    # a wait that did not wait for the enable first waited for nothing
    early = Registered(COMMAND, "urn:early", READY.inputs)
    with pytest.raises(ValueError, match="SERVICE_DISABLED"):
        project_apis.refuse_a_call_to_a_disabled_api(DISK, "p", ["urn:early", "urn:compute"], [COMPUTE, early])
    project_apis.refuse_a_call_to_a_disabled_api(DISK, "p", ["urn:ready"], [COMPUTE, READY])


def test_every_resource_that_calls_an_api_waits_for_the_apis_ready_task_which_waits_for_the_enables(mock_stack):
    stack = mock_stack()
    [ready] = [c for c in stack.of_type(COMMAND) if c.inputs["create"] == apis_ready_command()]
    services = stack.of_type(SERVICE)
    assert set(ready.dependencies) == {s.urn for s in services}
    asked = json.loads(ready.inputs["environment"][APIS_READY_ENV])
    assert asked == {
        "project": "my-tpu-project",
        "network": "default",
        "apis": sorted(s.inputs["service"] for s in services),
    }
    callers = [r for r in stack.resources if project_apis.calls(r.type) - project_apis.ON_IN_AN_EMPTY_PROJECT]
    assert callers and all(ready.urn in r.dependencies for r in callers)


@pytest.mark.parametrize(
    ("overrides", "remove", "expected"),
    [
        ({}, (), {"compute", "storage", "storage-api", "iam"}),
        ({"tpu-sft:autostop": "off"}, (), {"compute", "storage", "storage-api"}),
        (
            {"tpu-sft:sshAccess": "oslogin", "tpu-sft:osLoginAccount": "me@example.com"},
            ("tpu-sft:sshUser",),
            {"compute", "storage", "storage-api", "iam", "oslogin"},
        ),
    ],
)
def test_the_stack_enables_the_apis_it_calls_and_destroy_leaves_them_on(mock_stack, overrides, remove, expected):
    stack = mock_stack(overrides, remove=remove)  # every resource passed the empty project's stand-in
    services = stack.of_type(SERVICE)
    assert {s.inputs["service"].split(".")[0] for s in services} == expected
    for service in services:
        assert service.inputs["disableOnDestroy"] is False  # destroy never turns off an API another workload uses
        assert service.inputs["project"] == "my-tpu-project"
    called = set().union(*(project_apis.calls(r.type) for r in stack.resources))
    assert called - project_apis.ON_IN_AN_EMPTY_PROJECT == {s.inputs["service"] for s in services}
    assert "tpu.googleapis.com" not in called  # every TPU host is made through Compute Engine


def test_a_slice_enables_them_too(slice_stack):
    services = {s.inputs["service"] for s in slice_stack("v6e-16").of_type(SERVICE)}
    assert services == {"compute.googleapis.com", "iam.googleapis.com", *apis.STORAGE}


def test_a_resource_that_does_not_wait_for_its_api_is_refused(mock_stack, monkeypatch):
    """The program's own table with Cloud Storage left out: the bucket would be created before its API is on."""
    monkeypatch.setattr(apis, "BY_TYPE", tuple(row for row in apis.BY_TYPE if row[0] != "gcp:storage/"))
    with pytest.raises(Exception, match="storage-api.googleapis.com has not been used in project"):
        mock_stack()


def test_a_resource_that_waits_for_the_enable_but_not_for_the_answer_is_refused(mock_stack, monkeypatch):
    """A task that does not poll (as the program had none): the resources after it call APIs enabled a moment ago."""
    monkeypatch.setattr(apis, "apis_ready_command", lambda: "true")  # a task that waits for nothing
    with pytest.raises(Exception, match="SERVICE_DISABLED"):
        mock_stack()


def test_the_bootstrap_apis_are_the_ones_an_empty_project_is_assumed_to_have(mock_stack):
    assert set(apis.BOOTSTRAP) == project_apis.ON_IN_AN_EMPTY_PROJECT
    assert not set(apis.BOOTSTRAP) & {s.inputs["service"] for s in mock_stack().of_type(SERVICE)}
