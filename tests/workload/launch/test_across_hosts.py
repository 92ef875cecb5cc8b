"""What a LoRA trainer places across a slice's hosts before its first step, on two CPU processes of one JAX job
(across_hosts_live.py): a global random key, which Tunix's `reshard_pytree` (`jax.device_put`) refuses and the
launcher's patch places by `jit` (workload/launch/lora_keys_across_hosts.py), and a host's own optimizer counter,
which `device_put` cannot move to the other host and the optimizer's placement places by its value
(workload/launch/optimizer_placement.py). The whole LoRA run on a slice: tests/slice/test_lora_slice.py."""

import json
import os
import socket
import subprocess

import pytest

from tests.workload.tiny_run import REPO


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def both_hosts(maxtext_python) -> list[dict]:
    port = str(_free_port())
    script = str(REPO / "tests" / "workload" / "launch" / "across_hosts_live.py")
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    processes = [
        subprocess.Popen(
            [maxtext_python, script, str(i), port], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        for i in (0, 1)
    ]
    said = []
    for process in processes:
        out, err = process.communicate(timeout=300)
        assert process.returncode == 0, err[-3000:]
        said.append(json.loads(out.splitlines()[-1]))
    return said


def test_tunix_refuses_a_global_key_and_the_patch_places_it_by_jit(both_hosts):
    for said in both_hosts:
        assert said["tunix"].startswith("ValueError: device_put's second argument must be a Device or a Sharding")
        patched = said["patched"]
        assert patched["key_data"] == patched["expected_key_data"]  # the very key, on the target mesh
        assert patched["weight"] == [0.0, 1.0, 2.0, 3.0] and patched["shardings"] == ["('data',)"]


def test_a_hosts_own_counter_is_placed_across_hosts_by_its_value(both_hosts):
    for said in both_hosts:
        assert said["device_put"] is not None and "cross-host" in said["device_put"]
        assert said["placement"] == {"value": 3, "shards": 1, "global": True}


def test_the_key_patch_refuses_code_it_was_not_written_for(both_hosts):
    """A changed source or another version stops the launcher with the fix, and Tunix stays as it was."""
    said = both_hosts[0]["guard"]
    assert said["patched"] is False
    assert "differs from the code workload/launch/lora_keys_across_hosts.py was written for" in said["changed code"]
    assert said["another version"].startswith("google-tunix 0.1.7's reshard_pytree is not 0.0.1's")
