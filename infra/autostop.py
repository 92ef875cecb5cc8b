"""What lets the VM stop or delete itself (workload/autostop.py), and nothing more: a custom role holding only
compute.instances.stop (or .delete), bound to the VM's service account on this one instance.

Predefined roles are wider (roles/compute.instanceAdmin.v1 also creates, resizes and reads every instance),
and a project-level binding would let the VM stop every instance in the project.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

PERMISSIONS = {"stop": "compute.instances.stop", "delete": "compute.instances.delete"}


def role_id(stack: str, instance_name: str) -> str:
    """Custom role ids allow letters, digits, '_' and '.' (3–64): one role per stack and instance."""
    return re.sub(r"[^A-Za-z0-9_.]", "_", f"tpuSftAutostop.{stack}.{instance_name}")[:64]


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
        self.role = gcp.projects.IAMCustomRole(
            f"{name}-role",
            project=args.project,
            role_id=role_id(args.stack, name),
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
