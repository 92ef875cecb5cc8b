"""The advisory external-IP rule: an external IP is needless exposure on a host that SSH reaches only through IAP
(the pack's rules: policy/catalog.py)."""

from __future__ import annotations

from collections.abc import Sequence

from policy import firewall
from policy.model import FIREWALL, HOSTS, Resource, dig, items


def has_external_ip(resource: Resource) -> bool:
    return any(items(dig(nic, "accessConfigs")) for nic in items(dig(resource.props, "networkInterfaces")))


def _reaches(rule: Resource, instance: Resource) -> bool:
    targets = set(map(str, items(dig(rule.props, "targetTags"))))
    return not targets or bool(targets & set(map(str, items(dig(instance.props, "tags")))))


def external_ip_behind_iap(resources: Sequence[Resource]) -> list[tuple[Resource, str]]:
    """Instances (and slice templates) with an external IP whose every SSH firewall admits IAP's range only.

    A rule sourced by tags alone (a slice's traffic between its own hosts) admits nothing from outside, so it is
    not a way in."""
    ssh_rules = [
        r
        for r in resources
        if r.type == FIREWALL and firewall.admits_ssh(r.props) and items(dig(r.props, "sourceRanges"))
    ]
    found = []
    for instance in (r for r in resources if r.type in HOSTS and has_external_ip(r)):
        reaching = [rule for rule in ssh_rules if _reaches(rule, instance)]
        if reaching and all(firewall.ssh_only_from_iap(rule.props) for rule in reaching):
            found.append(
                (
                    instance,
                    f"instance {instance.name} has an external IP although SSH reaches it only through IAP: "
                    "set tpu-sft:externalIp false (and give its subnet Cloud NAT for downloads)",
                )
            )
    return found
