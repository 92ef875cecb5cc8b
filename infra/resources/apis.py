"""The Google APIs the stack calls, declared as resources, so that an empty project runs the program.

Declared, not checked: a check before anything bills could only fail and name a command for the user to run, then
run again; declaring each API (`gcp.projects.Service`) enables it in the same `pulumi up`. Google enables an API
eventually, and a new project's `default` network may appear only with Compute Engine's first request, which the
provider retries for neither (remote/pipeline/apis_ready.py cites both): so after the enable calls the `…-apis-ready`
task waits, bounded, until each API answers and the network exists, and every resource that calls an API waits for
that task (`depends_on`, added to each pulumi-gcp resource by its type, below). Pulumi starts a resource's create only
once every resource it depends on is created, and a pulumi-command `local.Command` is created when its command exits 0.
The task runs once: its inputs (the APIs, the project, the network) change only with the stack's needs.
`disable_on_destroy=False`: `pulumi destroy` forgets the API and leaves it on, so it never turns off an API another
workload of the project uses (an enabled API bills nothing by itself).

What must already be on, and cannot be declared: the Service Usage API (serviceusage.googleapis.com), which enabling any
API goes through, and the Cloud Resource Manager API (cloudresourcemanager.googleapis.com), which pulumi-gcp's
project-service resource reads the project through ("Enabling the Cloud Resource Manager API requires the Cloud
Resource Manager API", hashicorp/terraform-provider-google#6101 and #11435; a field report of Terraform's provider,
2020 and 2022, which pulumi-gcp wraps). `BOOTSTRAP` names both; README's prerequisites give the one command.

Declared where used: Compute Engine (every VM, disk, firewall, template, group, policy), Cloud Storage (its JSON API,
storage-api, which pulumi-gcp, gcsfs and orbax call, and the storage umbrella API), IAM (autostop's custom role, when
autostop is on) and OS Login (the stack's key, with sshAccess oslogin). Project-level IAM bindings (a slice's autostop)
go through Cloud Resource Manager, already on. Not the Cloud TPU API: the program makes every TPU host through Compute
Engine and calls tpu.googleapis.com nowhere.
"""

from __future__ import annotations

import json
from typing import Any

import pulumi
import pulumi_command as command
import pulumi_gcp as gcp

from infra.config.settings import Settings
from workload.core.contract import APIS_READY_ENV, apis_ready_command

SERVICE_TYPE = "gcp:projects/service:Service"
BOOTSTRAP = ("serviceusage.googleapis.com", "cloudresourcemanager.googleapis.com")
COMPUTE = "compute.googleapis.com"
STORAGE = ("storage-api.googleapis.com", "storage.googleapis.com")
IAM = "iam.googleapis.com"
OS_LOGIN = "oslogin.googleapis.com"
# Which APIs a pulumi-gcp resource calls, by the start of its type token. A type none matches calls only a BOOTSTRAP
# API (projects/iAMMember: Cloud Resource Manager) or none of Google's (random, command).
BY_TYPE: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("gcp:compute/", (COMPUTE,)),
    ("gcp:storage/", STORAGE),
    ("gcp:projects/iAMCustomRole:", (IAM,)),
    ("gcp:oslogin/", (OS_LOGIN,)),
)


def apis_of(type_token: str) -> tuple[str, ...]:
    return next((apis for prefix, apis in BY_TYPE if type_token.startswith(prefix)), ())


def needed(s: Settings) -> tuple[str, ...]:
    """The APIs this stack's resources call, beyond BOOTSTRAP."""
    return (
        COMPUTE,
        *STORAGE,
        *((IAM,) if s.autostop != "off" else ()),
        *((OS_LOGIN,) if s.ssh_access == "oslogin" else ()),
    )


def declare(s: Settings) -> dict[str, pulumi.Resource]:
    """Each needed API as a resource, the task that waits until they answer, and a stack transformation that makes
    every later pulumi-gcp resource that calls one of them wait for that task. Call it before any other resource is
    declared. Returns, for each API, what a call the transformation does not reach (an invoke) must wait for."""
    services = {
        api: gcp.projects.Service(
            f"{s.instance_name}-api-{api.split('.')[0]}",
            project=s.project,
            service=api,
            disable_on_destroy=False,  # destroy leaves the API on: another workload may use it
            disable_dependent_services=False,
        )
        for api in needed(s)
    }

    account = {"account": s.os_login_account} if s.os_login_account else {}
    asked = json.dumps(
        {"project": s.project, "network": s.network, "apis": sorted(services), **account}, sort_keys=True
    )
    ready = command.local.Command(
        f"{s.instance_name}-apis-ready",
        create=apis_ready_command(),
        environment={APIS_READY_ENV: asked},
        triggers=[asked],
        opts=pulumi.ResourceOptions(depends_on=list(services.values())),
    )

    def wait_for_its_apis(args: pulumi.ResourceTransformationArgs) -> pulumi.ResourceTransformationResult | None:
        if not any(api in services for api in apis_of(args.type_)):
            return None
        waits: list[Any] = [ready]
        return pulumi.ResourceTransformationResult(
            args.props, pulumi.ResourceOptions.merge(args.opts, pulumi.ResourceOptions(depends_on=waits))
        )

    pulumi.runtime.register_stack_transformation(wait_for_its_apis)
    return dict.fromkeys(services, ready)
