"""What lets the VM delete itself (workload/spend/autostop.py), and nothing more: a custom role holding only
compute.instances.delete, bound to the VM's service account on this one instance (never .stop: Compute Engine cannot
restart a stopped TPU VM, infra/config/setting_table.py `_autostop`). For a slice, what lets its hosts resize their own
group to 0: a custom role holding only compute.instanceGroupManagers.update (what `instanceGroupManagers.resize`
requires, per the Compute API reference: "Authorization requires the following IAM permission on the specified
resource instanceGroupManager"), on the project (why not on its group: below).

Predefined roles are wider (roles/compute.instanceAdmin.v1 also creates, resizes and reads every instance),
and a project-level binding would let the VM delete every instance in the project. A slice's grant cannot be that
narrow: a group has no IAM policy of its own (pulumi-gcp 10.2.0 has no InstanceGroupManager IAM resource, as there
is for an instance), and an IAM condition cannot name one. Google's list of the resource types whose `resource.name`
IAM Conditions evaluate (cloud.google.com/iam/docs/conditions-resource-attributes) names, for Compute Engine,
images, instances and instance templates, not instance group managers; for any other type the attribute is not
recognised, so a condition `resource.name == ".../instanceGroupManagers/G"` never grants and the resize is refused.
So the slice's role, still one permission, is bound on the project without a condition: the hosts may resize any
group of the project, and do nothing else. `instanceGroupManagers.resize` asks for no other permission: the group,
not the caller, creates and deletes its instances, as the Google APIs Service Agent
(cloud.google.com/compute/docs/access/service-accounts#google_apis_service_agent).

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

PERMISSION = "compute.instances.delete"
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
        description="Lets tpu-sft's autostop end its VM (bound on it) or its slice (on the project) once idle.",
        permissions=permissions,
        opts=pulumi.ResourceOptions(parent=parent),
    )


@dataclass(frozen=True)
class AutostopAccessArgs:
    project: str
    zone: str
    stack: str
    instance_name: pulumi.Input[str]
    service_account_email: pulumi.Input[str]


class AutostopAccess(pulumi.ComponentResource):
    def __init__(self, name: str, args: AutostopAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-sft:infra:AutostopAccess", name, None, opts)
        self.role = custom_role(
            self, name, args.project, args.stack, "tpu-sft autostop: delete its own VM", [PERMISSION]
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


@dataclass(frozen=True)
class SliceAutostopAccessArgs:
    project: str
    stack: str
    service_account_email: pulumi.Input[str]


class SliceAutostopAccess(pulumi.ComponentResource):
    def __init__(self, name: str, args: SliceAutostopAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-sft:infra:SliceAutostopAccess", name, None, opts)
        self.role = custom_role(
            self, name, args.project, args.stack, "tpu-sft autostop: resize its slice to 0", [GROUP_PERMISSION]
        )
        self.binding = gcp.projects.IAMMember(
            f"{name}-binding",
            project=args.project,
            role=self.role.name,
            member=pulumi.Output.concat("serviceAccount:", args.service_account_email),
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.register_outputs({"role": self.role.name})
