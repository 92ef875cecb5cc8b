"""The VM's ingress, owned by the stack: SSH from the allowed ranges, and nothing else from anywhere.

A project's network may carry rules of its own that reach every instance: the default network's
`default-allow-ssh` admits tcp:22 from 0.0.0.0/0 at priority 65534 (also `default-allow-rdp`, `-icmp`). A
deny of all ingress on the VM's tag, at a priority between our allow and those defaults, makes "SSH only from
the listed ranges" true whatever the network holds: GCE applies the rule with the lowest priority number.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

ALLOW_PRIORITY = 1000  # GCE's default priority, written out: the deny below must come after it
DENY_PRIORITY = 65000  # after our allow, before the network's default rules (65534)
ANYWHERE = "0.0.0.0/0"


def _ingress(
    parent: pulumi.Resource,
    name: str,
    network: str,
    target_tag: str,
    description: str,
    *,
    priority: int,
    allows: list[gcp.compute.FirewallAllowArgs] | None = None,
    denies: list[gcp.compute.FirewallDenyArgs] | None = None,
    source_ranges: list[str] | None = None,
    source_tags: list[str] | None = None,
) -> gcp.compute.Firewall:
    """An ingress rule, of `parent`, for the instances tagged `target_tag`: its priority, what it allows or denies,
    and from where."""
    return gcp.compute.Firewall(
        name,
        network=network,
        direction="INGRESS",
        target_tags=[target_tag],
        description=description,
        priority=priority,
        allows=allows,
        denies=denies,
        source_ranges=source_ranges,
        source_tags=source_tags,
        opts=pulumi.ResourceOptions(parent=parent),
    )


@dataclass(frozen=True)
class SshFirewallArgs:
    network: str
    source_ranges: tuple[str, ...]
    target_tag: str


class SshFirewall(pulumi.ComponentResource):
    def __init__(self, name: str, args: SshFirewallArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-sft:infra:SshFirewall", name, None, opts)
        self.firewall = _ingress(
            self,
            name,
            args.network,
            args.target_tag,
            "tpu-sft: SSH to the TPU VM for its post-deploy tasks",
            priority=ALLOW_PRIORITY,
            allows=[gcp.compute.FirewallAllowArgs(protocol="tcp", ports=["22"])],
            source_ranges=list(args.source_ranges),
        )
        self.deny_other = _ingress(
            self,
            f"{name}-deny-other",
            args.network,
            args.target_tag,
            "tpu-sft: no other ingress to the TPU VM, whatever the network's default rules allow",
            priority=DENY_PRIORITY,
            denies=[gcp.compute.FirewallDenyArgs(protocol="all")],
            source_ranges=[ANYWHERE],
        )
        self.name = self.firewall.name
        self.register_outputs({"name": self.name, "deny_name": self.deny_other.name})


@dataclass(frozen=True)
class SliceFirewallArgs:
    network: str
    tag: str  # every host of the slice carries it; traffic is admitted from these hosts to these hosts only


class SliceFirewall(pulumi.ComponentResource):
    """The slice's own traffic between its hosts (JAX's coordinator and collectives over the data-centre
    network), which the deny above would otherwise drop: the default network's `default-allow-internal` sits at
    65534, after it. Sourced by tag, not by range, so nothing outside the slice gains anything, SSH included."""

    def __init__(self, name: str, args: SliceFirewallArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-sft:infra:SliceFirewall", name, None, opts)
        self.firewall = _ingress(
            self,
            name,
            args.network,
            args.tag,
            "tpu-sft: traffic between the hosts of one TPU slice, and from nowhere else",
            priority=ALLOW_PRIORITY,
            allows=[gcp.compute.FirewallAllowArgs(protocol=protocol) for protocol in ("tcp", "udp", "icmp")],
            source_tags=[args.tag],
        )
        self.name = self.firewall.name
        self.register_outputs({"name": self.name})
