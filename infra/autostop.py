"""What lets the VM stop or delete itself (workload/spend/autostop.py), and nothing more: a custom role holding only
compute.instances.stop (or .delete), bound to the VM's service account on this one instance. For a slice, what
lets its hosts resize their own group to 0: a custom role holding only compute.instanceGroupManagers.update (what
`instanceGroupManagers.resize` requires, per the Compute API reference: "Authorization requires the following IAM
permission on the specified resource instanceGroupManager"), on that one group.

Predefined roles are wider (roles/compute.instanceAdmin.v1 also creates, resizes and reads every instance),
and a project-level binding would let the VM stop every instance in the project. A group has no IAM policy of its
own in pulumi-gcp 10.2.0 (no InstanceGroupManager IAM resource, as there is for an instance), so the slice's
binding is on the project with an IAM condition naming the one group (`resource.name`, which Google's IAM
Conditions evaluate for Compute Engine resources: cloud.google.com/iam/docs/configuring-resource-based-access).
That the name is evaluated for this resource type is read from that page's list of services, not seen: where it
were not, the condition would be false and the resize refused (403, in autostop's log), never wider.

Each creation of the role gets an ID of its own: a deleted custom role's ID cannot be used again for 37 days
(undeletable for the first 7, then purged), so a fixed ID made `pulumi up` fail for weeks after `pulumi destroy`
or `autostop: off`. The random suffix is a resource of its own, created and deleted with the role, so it stays
the same from one `pulumi up` to the next and changes only when the role is made anew.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
import pulumi_random as random

PERMISSIONS = {"stop": "compute.instances.stop", "delete": "compute.instances.delete"}
GROUP_PERMISSION = "compute.instanceGroupManagers.update"  # instanceGroupManagers.resize
ROLE_ID_MAX = 64  # custom role IDs: [a-zA-Z0-9_.]{3,64}
ROLE_SUFFIX_BYTES = 4
ROLE_SUFFIX_HEX_DIGITS = 2 * ROLE_SUFFIX_BYTES


def role_id_prefix(stack: str, name: str) -> str:
    """The readable part of the role's ID (stack and instance), cut to leave room for '.' and the random suffix."""
    readable = re.sub(r"[^A-Za-z0-9_.]", "_", f"tpuSftAutostop.{stack}.{name}")
    return readable[: ROLE_ID_MAX - 1 - ROLE_SUFFIX_HEX_DIGITS] + "."


def custom_role(
    parent: pulumi.Resource, name: str, project: str, stack: str, title: str, permissions: list[str]
) -> gcp.projects.IAMCustomRole:
    # Replaced whenever the role would be (its project), so a re-created role never reuses a deleted one's ID.
    role_id = random.RandomId(
        f"{name}-role-id",
        byte_length=ROLE_SUFFIX_BYTES,
        prefix=role_id_prefix(stack, name),
        keepers={"project": project},
        opts=pulumi.ResourceOptions(parent=parent),
    )
    return gcp.projects.IAMCustomRole(
        f"{name}-role",
        project=project,
        role_id=role_id.hex,
        title=title,
        description="Lets tpu-sft's autostop end its VM or slice once idle; bound on that one resource only.",
        permissions=permissions,
        opts=pulumi.ResourceOptions(parent=parent),
    )


@dataclass(frozen=True)
class AutostopAccessArgs:
    project: str
    zone: str
    stack: str
    action: str  # stop | delete
    instance_name: pulumi.Input[str]
    service_account_email: pulumi.Input[str]


class AutostopAccess(pulumi.ComponentResource):
    def __init__(self, name: str, args: AutostopAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-sft:infra:AutostopAccess", name, None, opts)
        self.role = custom_role(
            self,
            name,
            args.project,
            args.stack,
            f"tpu-sft autostop: {args.action} its own VM",
            [PERMISSIONS[args.action]],
        )
        self.binding = gcp.compute.InstanceIAMMember(
            f"{name}-binding",
            project=args.project,
            zone=args.zone,
            instance_name=args.instance_name,
            role=self.role.name,
            member=pulumi.Output.concat("serviceAccount:", args.service_account_email),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"role": self.role.name})


def group_resource_name(project: str, zone: str, group: str) -> str:
    """The group as IAM Conditions name it (projects/PROJECT/zones/ZONE/instanceGroupManagers/NAME)."""
    return f"projects/{project}/zones/{zone}/instanceGroupManagers/{group}"


@dataclass(frozen=True)
class SliceAutostopAccessArgs:
    project: str
    zone: str
    stack: str
    group_name: pulumi.Input[str]
    service_account_email: pulumi.Input[str]


class SliceAutostopAccess(pulumi.ComponentResource):
    def __init__(self, name: str, args: SliceAutostopAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-sft:infra:SliceAutostopAccess", name, None, opts)
        self.role = custom_role(
            self, name, args.project, args.stack, "tpu-sft autostop: resize its own slice to 0", [GROUP_PERMISSION]
        )
        self.binding = gcp.projects.IAMMember(
            f"{name}-binding",
            project=args.project,
            role=self.role.name,
            member=pulumi.Output.concat("serviceAccount:", args.service_account_email),
            condition=gcp.projects.IAMMemberConditionArgs(
                title="tpu-sft autostop: this slice's group only",
                expression=pulumi.Output.from_input(args.group_name).apply(
                    lambda group: f'resource.name == "{group_resource_name(args.project, args.zone, group)}"'
                ),
            ),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"role": self.role.name})
