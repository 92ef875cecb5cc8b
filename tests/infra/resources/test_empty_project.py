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

from dataclasses import dataclass

import pytest

from infra.resources import apis
from rehearsal import project_apis

SERVICE = "gcp:projects/service:Service"


@dataclass
class Registered:
    type: str
    urn: str
    inputs: dict


def test_the_stand_in_refuses_a_call_to_an_api_not_enabled_first():
    compute = Registered(SERVICE, "urn:compute", {"service": "compute.googleapis.com"})
    with pytest.raises(ValueError, match="compute.googleapis.com has not been used in project p"):
        project_apis.refuse_a_call_to_a_disabled_api("gcp:compute/disk:Disk", "p", [], [compute])
    project_apis.refuse_a_call_to_a_disabled_api("gcp:compute/disk:Disk", "p", ["urn:compute"], [compute])
    # What an empty project has on needs nothing declared: Cloud Resource Manager, for a project IAM binding.
    project_apis.refuse_a_call_to_a_disabled_api("gcp:projects/iAMMember:IAMMember", "p", [], [])


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


def test_the_bootstrap_apis_are_the_ones_an_empty_project_is_assumed_to_have(mock_stack):
    assert set(apis.BOOTSTRAP) == project_apis.ON_IN_AN_EMPTY_PROJECT
    assert not set(apis.BOOTSTRAP) & {s.inputs["service"] for s in mock_stack().of_type(SERVICE)}
