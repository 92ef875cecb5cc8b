"""A VM reached over SSH only through IAP has no external IP (advisory)."""

import pytest

from policy import external_ip
from policy.model import FIREWALL, INSTANCE, Resource

IAP = "35.235.240.0/20"


def vm(*, external_ip=True, tags=("tpu-sft-dev",)):
    nic = {"network": "default", **({"accessConfigs": [{}]} if external_ip else {})}
    return Resource(INSTANCE, "vm", {"networkInterfaces": [nic], "tags": list(tags)}, urn="urn:vm")


def ssh_rule(name="ssh", ranges=(IAP,), tags=("tpu-sft-dev",)):
    props = {"allows": [{"protocol": "tcp", "ports": ["22"]}], "sourceRanges": list(ranges), "targetTags": list(tags)}
    return Resource(FIREWALL, name, props)


@pytest.mark.parametrize(
    "resources",
    [
        pytest.param([vm(external_ip=False), ssh_rule()], id="no-external-ip"),
        pytest.param([vm(), ssh_rule(ranges=["203.0.113.0/24"])], id="direct-ssh-needs-the-ip"),
        pytest.param([vm(), ssh_rule(), ssh_rule("direct", ranges=["203.0.113.0/24"])], id="iap-and-direct"),
        pytest.param([vm(), ssh_rule(tags=["other-vm"])], id="rule-targets-another-vm"),
        pytest.param([vm()], id="no-ssh-rule-at-all"),
    ],
)
def test_passes(resources):
    assert external_ip.external_ip_behind_iap(resources) == []


@pytest.mark.parametrize(
    "resources",
    [
        pytest.param([vm(), ssh_rule()], id="as-the-dev-stack-declares"),
        pytest.param([vm(), ssh_rule(tags=[])], id="rule-for-every-instance"),
    ],
)
def test_fails(resources):
    [(resource, message)] = external_ip.external_ip_behind_iap(resources)
    assert resource.urn == "urn:vm"
    assert message.startswith("instance vm has an external IP although SSH reaches it only through IAP")
    assert "tpu-sft:externalIp false" in message
