"""Firewall rules: what reaches SSH, and from where."""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from typing import Any

from policy.model import dig, items

IAP_RANGE = ipaddress.ip_network("35.235.240.0/20")  # Google's IAP TCP-forwarding source range
SSH_PORT = 22
_TCP_OR_ALL = {"tcp", "6", "all"}  # "6" is tcp by protocol number
_PORTED = {"tcp", "udp", "sctp", "6", "17", "132"}  # ICMP and the like have no ports to leave open


def _networks(ranges: Any) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    networks = []
    for text in items(ranges):
        try:
            networks.append(ipaddress.ip_network(str(text), strict=False))
        except ValueError:
            continue  # GCP rejects it at create time; not this rule's concern
    return networks


def _port_in(port: int, spec: Any) -> bool:
    low, _, high = str(spec).partition("-")
    try:
        return int(low) <= port <= int(high or low)
    except ValueError:
        return False


def _is_active_ingress(props: Mapping[str, Any]) -> bool:
    return dig(props, "direction", default="INGRESS") == "INGRESS" and not dig(props, "disabled", default=False)


def _ssh_allowed(allow: Mapping[str, Any]) -> bool:
    protocol = str(dig(allow, "protocol", default="")).lower()
    if protocol not in _TCP_OR_ALL:
        return False
    ports = items(dig(allow, "ports"))
    return protocol == "all" or not ports or any(_port_in(SSH_PORT, spec) for spec in ports)


def admits_ssh(props: Mapping[str, Any]) -> bool:
    """An enabled ingress rule that lets tcp:22 through."""
    return _is_active_ingress(props) and any(_ssh_allowed(allow) for allow in items(dig(props, "allows")))


def ssh_only_from_iap(props: Mapping[str, Any]) -> bool:
    """Every source of this rule is inside IAP's range (and it names no source tags or accounts)."""
    sources = _networks(dig(props, "sourceRanges"))
    others = items(dig(props, "sourceTags")) + items(dig(props, "sourceServiceAccounts"))
    return (
        bool(sources)
        and not others
        and all(
            net.version == 4 and net.subnet_of(IAP_RANGE)  # type: ignore[arg-type]
            for net in sources
        )
    )


def _what_it_opens(allow: Mapping[str, Any]) -> str | None:
    protocol = str(dig(allow, "protocol", default="")).lower()
    ports = items(dig(allow, "ports"))
    if protocol == "all":
        return "every protocol and port"
    if not ports:
        return f"every {protocol} port" if protocol in _PORTED else None
    if protocol in _TCP_OR_ALL and any(_port_in(SSH_PORT, spec) for spec in ports):
        return "SSH (tcp:22)"
    return None


def open_to_internet(name: str, props: Mapping[str, Any]) -> list[str]:
    """SSH, or any whole protocol, admitted from 0.0.0.0/0 or ::/0."""
    if not _is_active_ingress(props):
        return []
    world = [str(net) for net in _networks(dig(props, "sourceRanges")) if net.prefixlen == 0]
    if not world:
        return []
    opened = [what for allow in items(dig(props, "allows")) if (what := _what_it_opens(allow))]
    return [
        f"firewall {name} admits {what} from {' and '.join(world)} (the whole internet): limit "
        f"tpu-sft:sshSourceRanges to IAP's {IAP_RANGE} or your own CIDRs"
        for what in opened
    ]
