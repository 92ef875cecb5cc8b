"""No firewall admits SSH, or a whole protocol, from the whole internet (mandatory)."""

import pytest

from policy import firewall

IAP = "35.235.240.0/20"


def rule(*, ranges=(IAP,), allows=({"protocol": "tcp", "ports": ["22"]},), **extra):
    return {"sourceRanges": list(ranges), "allows": list(allows), "targetTags": ["tpu-sft"], **extra}


@pytest.mark.parametrize(
    "props",
    [
        pytest.param(rule(), id="ssh-from-iap-as-declared"),
        pytest.param(rule(ranges=["203.0.113.0/24"]), id="ssh-from-own-cidr"),
        pytest.param(rule(ranges=["0.0.0.0/0"], allows=[{"protocol": "tcp", "ports": ["443"]}]), id="https-from-world"),
        pytest.param(rule(ranges=["0.0.0.0/0"], allows=[{"protocol": "icmp"}]), id="ping-from-world"),
        pytest.param(rule(ranges=["0.0.0.0/0"], direction="EGRESS"), id="egress-rule"),
        pytest.param(rule(ranges=["0.0.0.0/0"], disabled=True), id="disabled-rule"),
        pytest.param(rule(ranges=["not-a-cidr"]), id="malformed-range-is-not-the-world"),
        pytest.param(
            {"sourceRanges": ["0.0.0.0/0"], "denies": [{"protocol": "all"}], "targetTags": ["tpu-sft"]},
            id="deny-all-from-world-as-declared",
        ),
    ],
)
def test_passes(props):
    assert firewall.open_to_internet("fw", props) == []


@pytest.mark.parametrize(
    ("props", "opened", "sources"),
    [
        pytest.param(rule(ranges=["0.0.0.0/0"]), "SSH (tcp:22)", "0.0.0.0/0", id="ssh-from-world"),
        pytest.param(rule(ranges=["::/0"]), "SSH (tcp:22)", "::/0", id="ssh-from-world-v6"),
        pytest.param(rule(ranges=[IAP, "0.0.0.0/0"]), "SSH (tcp:22)", "0.0.0.0/0", id="world-beside-iap"),
        pytest.param(
            rule(ranges=["0.0.0.0/0"], allows=[{"protocol": "tcp", "ports": ["20-30"]}]),
            "SSH (tcp:22)",
            "0.0.0.0/0",
            id="port-range-covering-22",
        ),
        pytest.param(
            rule(ranges=["0.0.0.0/0"], allows=[{"protocol": "6", "ports": ["22"]}]),
            "SSH (tcp:22)",
            "0.0.0.0/0",
            id="tcp-by-protocol-number",
        ),
        pytest.param(
            rule(ranges=["0.0.0.0/0"], allows=[{"protocol": "tcp"}]), "every tcp port", "0.0.0.0/0", id="all-tcp-ports"
        ),
        pytest.param(
            rule(ranges=["0.0.0.0/0"], allows=[{"protocol": "udp"}]), "every udp port", "0.0.0.0/0", id="all-udp-ports"
        ),
        pytest.param(
            rule(ranges=["0.0.0.0/0"], allows=[{"protocol": "all"}]),
            "every protocol and port",
            "0.0.0.0/0",
            id="everything",
        ),
    ],
)
def test_fails_naming_what_is_open_and_the_fix(props, opened, sources):
    [message] = firewall.open_to_internet("fw", props)
    assert message.startswith(f"firewall fw admits {opened} from {sources}")
    assert "tpu-sft:sshSourceRanges" in message and IAP in message
    assert "\n" not in message


def test_each_open_allow_is_reported():
    props = rule(ranges=["0.0.0.0/0"], allows=[{"protocol": "tcp", "ports": ["22"]}, {"protocol": "udp"}])
    assert len(firewall.open_to_internet("fw", props)) == 2


@pytest.mark.parametrize(
    ("props", "expected"),
    [
        (rule(), True),
        (rule(ranges=["35.235.241.0/24"]), True),
        (rule(ranges=[IAP, "203.0.113.0/24"]), False),
        (rule(ranges=[]), False),
        (rule(sourceTags=["bastion"]), False),
    ],
)
def test_ssh_only_from_iap(props, expected):
    assert firewall.ssh_only_from_iap(props) is expected
