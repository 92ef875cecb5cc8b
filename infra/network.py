"""The SSH firewall rule: the only ingress the VM gets."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp


@dataclass(frozen=True)
class SshFirewallArgs:
    network: str
    source_ranges: tuple[str, ...]
    target_tag: str


class SshFirewall(pulumi.ComponentResource):
    def __init__(self, name: str, args: SshFirewallArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-sft:infra:SshFirewall", name, None, opts)
        self.firewall = gcp.compute.Firewall(
            name,
            network=args.network,
            direction="INGRESS",
            allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["22"])],
            source_ranges=list(args.source_ranges),
            target_tags=[args.target_tag],
            description="tpu-sft: SSH to the TPU VM for its post-deploy tasks",
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.name = self.firewall.name
        self.register_outputs({"name": self.name})
