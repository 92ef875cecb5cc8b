"""A slice's worker order from its hosts' `tpu-env` (remote/pipeline/worker_order.py): parsed as jax parses it, the
workers and `--worker-hostnames` in TPU_WORKER_ID order, and one line naming the host for every way the ids can be
wrong. The whole path over SSH, against per-host metadata stand-ins: tests/remote/pipeline/test_slice_phase.py."""

from __future__ import annotations

import subprocess

import pytest

from rehearsal.metadata_standin import tpu_env
from remote.pipeline.slice_claim import hostnames_flag
from remote.pipeline.worker_order import (
    WorkerOrderError,
    ordered,
    read_command,
    tpu_env_of,
    tpu_env_value,
    worker_id_of,
)
from remote.ssh.errors import EXIT_FAILED
from remote.ssh.hosts import WorkerHost

HOSTS = ("slice-01", "slice-02", "slice-03", "slice-04")


def envs(*ids: object, hosts: int = 4) -> list[str]:
    return [tpu_env(0, hosts).replace("TPU_WORKER_ID: '0'", f"TPU_WORKER_ID: '{i}'") for i in ids]


def test_the_workers_follow_each_hosts_own_tpu_worker_id_not_the_targets_order():
    workers = ordered(HOSTS, envs(2, 0, 3, 1))
    assert workers == (
        WorkerHost(0, "slice-02"),
        WorkerHost(1, "slice-04"),
        WorkerHost(2, "slice-01"),
        WorkerHost(3, "slice-03"),
    )
    assert hostnames_flag(workers) == "slice-02,slice-04,slice-01,slice-03"  # worker 0's host first: the coordinator


def test_tpu_env_is_read_as_jax_reads_it():
    text = "ACCELERATOR_TYPE: 'v6e-16'\nTOPOLOGY: '4x4'\n  TPU_WORKER_ID :  '3'  \nZONE: 'us-east5-b'\nnoise\n"
    assert tpu_env_value(text, "TPU_WORKER_ID") == "3"
    assert tpu_env_value(text, "TOPOLOGY") == "4x4"
    assert tpu_env_value("TPU_WORKER_ID: 7", "TPU_WORKER_ID") == "7"  # unquoted
    assert tpu_env_value(text, "MEGASCALE_NUM_SLICES") is None
    assert worker_id_of("h", text) == 3


@pytest.mark.parametrize(
    ("ids", "said"),
    [
        pytest.param(
            (0, 1, 1, 3),
            "slice-02 and slice-03: both have TPU_WORKER_ID 1 in their tpu-env. Fix: compare each host's tpu-env",
            id="repeated",
        ),
        pytest.param(
            (0, 1, 4, 2),
            "slice-03: its tpu-env's TPU_WORKER_ID 4 is not a worker of the 4 hosts the target lists (0 to 3).",
            id="out-of-range",
        ),
        pytest.param((0, "one", 2, 3), "slice-02: its tpu-env's TPU_WORKER_ID is 'one', not a whole", id="word"),
        pytest.param((0, 1, -2, 3), "slice-03: its tpu-env's TPU_WORKER_ID is '-2', not a whole", id="negative"),
        pytest.param((0, 1, 2, "٣"), "slice-04: its tpu-env's TPU_WORKER_ID is '٣', not a whole", id="arabic"),
        pytest.param((0, 1, 2, ""), "slice-04: its tpu-env's TPU_WORKER_ID is '', not a whole", id="empty"),
    ],
)
def test_a_wrong_id_is_refused_in_one_line_naming_the_host(ids, said):
    with pytest.raises(WorkerOrderError) as refused:
        ordered(HOSTS, envs(*ids))
    message = str(refused.value)
    assert message.startswith(said) and "\n" not in message
    assert "gcloud compute instance-groups managed list-instances" in message  # what to do
    assert refused.value.exit_code == EXIT_FAILED


def test_a_missing_id_is_refused_naming_the_host():
    texts = envs(0, 1, 2, 3)
    texts[1] = texts[1].replace("TPU_WORKER_ID: '1'\n", "")
    with pytest.raises(WorkerOrderError, match=r"^slice-02: its tpu-env has no TPU_WORKER_ID\. Fix: "):
        ordered(HOSTS, texts)


def test_a_slice_size_other_than_the_targets_is_refused():
    """HOST_BOUNDS (x,y,z hosts) is the slice's size as the platform knows it: a target of three of its four hosts
    has ids 0…2 that look whole, and would start a JAX job that waits for a fourth process forever."""
    with pytest.raises(WorkerOrderError) as refused:
        ordered(HOSTS[:3], envs(0, 1, 2, hosts=4))
    assert str(refused.value).startswith(
        "slice-01: its tpu-env's HOST_BOUNDS make a slice of 4 hosts, but the target lists 3."
    )
    assert ordered(HOSTS[:3], [e.replace("HOST_BOUNDS: '1,4,1'\n", "") for e in envs(2, 1, 0)])[0].host == "slice-03"


@pytest.mark.parametrize(
    ("printed", "said"),
    [
        ("Not Found\n404", "h: its instance metadata has no tpu-env, so its TPU worker id is unknown. Fix: "),
        ("Missing required header\n403", "h: the metadata server answered HTTP 403 for tpu-env. Fix: "),
        ("", "h: the metadata server answered HTTP (none) for tpu-env. Fix: "),
    ],
)
def test_no_tpu_env_is_refused_in_one_line(printed, said):
    with pytest.raises(WorkerOrderError) as refused:
        tpu_env_of("h", printed)
    assert str(refused.value).startswith(said) and "\n" not in str(refused.value)


def test_the_status_line_is_split_from_the_text():
    assert tpu_env_of("h", "TPU_WORKER_ID: '2'\n200") == "TPU_WORKER_ID: '2'"
    assert tpu_env_of("h", "TPU_WORKER_ID: '2'\n\n200") == "TPU_WORKER_ID: '2'\n"


def test_the_read_asks_the_metadata_server_with_its_header_and_prints_the_status_last():
    """The command as the host's shell runs it, with curl replaced by one that prints its arguments."""
    fake = 'curl() { printf "%s\\n" "$@"; }; '
    for env, host in (("", "metadata.google.internal"), ("GCE_METADATA_HOST=127.0.0.9:8080 ", "127.0.0.9:8080")):
        argv = subprocess.run(
            ["sh", "-c", f'{fake}{env}eval "$0"', read_command()], capture_output=True, text=True, check=True
        ).stdout.splitlines()
        assert argv[argv.index("--header") + 1] == "Metadata-Flavor: Google"
        assert argv[argv.index("--write-out") + 1] == "\\n%{http_code}"
        assert argv[-1] == f"http://{host}/computeMetadata/v1/instance/attributes/tpu-env"
        assert "--fail" not in argv  # a 404 is a status to read, not curl's exit code
