"""What lets the VM stop or delete itself (workload/autostop.py), and nothing more: a custom role holding only
compute.instances.stop (or .delete), bound to the VM's service account on this one instance.

Predefined roles are wider (roles/compute.instanceAdmin.v1 also creates, resizes and reads every instance),
and a project-level binding would let the VM stop every instance in the project.

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
ROLE_ID_MAX = 64  # custom role IDs: [a-zA-Z0-9_.]{3,64}
ROLE_SUFFIX_BYTES = 4
ROLE_SUFFIX_HEX_DIGITS = 2 * ROLE_SUFFIX_BYTES


def role_id_prefix(stack: str, name: str) -> str:
    """The readable part of the role's ID (stack and instance), cut to leave room for '.' and the random suffix."""
    readable = re.sub(r"[^A-Za-z0-9_.]", "_", f"tpuSftAutostop.{stack}.{name}")
    return readable[: ROLE_ID_MAX - 1 - ROLE_SUFFIX_HEX_DIGITS] + "."


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
        # Replaced whenever the role would be (its project), so a re-created role never reuses a deleted one's ID.
        self.role_id = random.RandomId(
            f"{name}-role-id",
            byte_length=ROLE_SUFFIX_BYTES,
            prefix=role_id_prefix(args.stack, name),
            keepers={"project": args.project},
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.role = gcp.projects.IAMCustomRole(
            f"{name}-role",
            project=args.project,
            role_id=self.role_id.hex,
            title=f"tpu-sft autostop: {args.action} its own VM",
            description="Lets a tpu-sft VM's autostop end the VM once idle; bound on that one instance only.",
            permissions=[PERMISSIONS[args.action]],
            opts=pulumi.ResourceOptions(parent=self),
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
