"""The pack as the engine runs it: `python -m pulumi.policy` in policy/, a gRPC analyzer on loopback, asked
over the wire what it enforces and what it makes of a resource."""

import json
import subprocess
import sys
import threading
from pathlib import Path

import grpc
import pytest
from google.protobuf import empty_pb2, struct_pb2
from pulumi.runtime.proto import analyzer_pb2, analyzer_pb2_grpc

ROOT = Path(__file__).resolve().parents[2]
WORLD_SSH = {"allows": [{"protocol": "tcp", "ports": ["22"]}], "sourceRanges": ["0.0.0.0/0"], "targetTags": ["vm"]}
DATA_DISK = {"labels": {"app": "a", "stack": "s", "owner": "o", "cost-center": "c", "tpu-sft-role": "data"}}


@pytest.fixture(scope="module")
def analyzer():
    """A running pack (stack config: replacing the data disk allowed), as a gRPC stub."""
    env = {"PULUMI_CONFIG": json.dumps({"tpu-sft:allowDataDiskReplace": "true"}), "PATH": "/usr/bin:/bin"}
    # The same command the engine's pulumi-analyzer-policy-python shim runs, from the pack's folder.
    process = subprocess.Popen(
        [sys.executable, "-u", "-m", "pulumi.policy", "127.0.0.1:1", "."],
        cwd=ROOT / "policy",
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    first_line: list[str] = []
    reader = threading.Thread(target=lambda: first_line.append(process.stdout.readline()), daemon=True)
    reader.start()
    reader.join(timeout=60)
    try:
        started = first_line and first_line[0].strip().isdigit()
        assert started, process.stderr.read() if process.poll() is not None else "no port announced"
        with grpc.insecure_channel(f"127.0.0.1:{first_line[0].strip()}") as channel:
            grpc.channel_ready_future(channel).result(timeout=30)
            yield analyzer_pb2_grpc.AnalyzerStub(channel)
    finally:
        process.kill()
        process.wait()


def analyze(stub, type_, props):
    properties = struct_pb2.Struct()
    properties.update(props)
    request = analyzer_pb2.AnalyzeRequest(
        type=type_,
        properties=properties,
        urn=f"urn:pulumi:dev::tpu-sft::{type_}::res",
        name="res",
        options=analyzer_pb2.AnalyzerResourceOptions(),
    )
    return [(d.policyName, d.message) for d in stub.Analyze(request, timeout=30).diagnostics]


def test_the_pack_declares_its_policies(analyzer):
    info = analyzer.GetAnalyzerInfo(empty_pb2.Empty(), timeout=30)
    assert info.name == "tpu-sft"
    assert {p.name for p in info.policies} == {
        "ssh-not-open-to-internet",
        "reservation-bound-has-reservation",
        "billable-resources-labelled",
        "data-disk-survives-replace",
        "checkpoint-bucket-survives-replace",
        "boot-disk-fits-maxtext",
        "run-duration-capped",
        "no-external-ip-behind-iap",
        "slice-hosts-stay-ended",
    }


def test_a_violation_comes_back_over_the_wire(analyzer):
    [(policy, message)] = analyze(analyzer, "gcp:compute/firewall:Firewall", WORLD_SSH)
    assert policy == "ssh-not-open-to-internet" and "0.0.0.0/0" in message


def test_the_stack_config_in_pulumi_config_reaches_the_rules(analyzer):
    assert analyze(analyzer, "gcp:compute/disk:Disk", DATA_DISK) == []
