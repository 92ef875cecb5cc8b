"""Tunix's optimizer state placed one array at a time (workload/launch/optimizer_placement.py): the most a device holds
beyond the state is one of its arrays, where Tunix 0.1.7's own placement holds all of it twice. Real Tunix and
flax on two CPU devices (optimizer_placement_live.py); the chip's own figures are in bench/RESULTS.md."""

import json
import os
import subprocess

import pytest

from tests.workload.tiny_run import REPO


def _run(maxtext_python: str, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [maxtext_python, *argv],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def placements(maxtext_python) -> dict:
    done = _run(maxtext_python, str(REPO / "tests" / "workload" / "launch" / "optimizer_placement_live.py"))
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_tunix_holds_the_optimizer_state_twice_while_it_places_it(placements):
    tunix = placements["tunix"]
    assert tunix["largest"] - tunix["before"] >= tunix["state_bytes"], tunix


def test_the_patched_placement_holds_one_copy_and_one_array_at_most(placements):
    patched = placements["patched"]
    assert patched["largest"] - patched["before"] <= patched["largest_array_bytes"] + 64, patched
    assert patched["after"] - patched["before"] <= 64, patched  # a few bytes of bookkeeping arrays at most
    assert patched["same_values"] and patched["shardings"] == ["P('fsdp', None)"], patched


def test_the_patched_placement_finds_the_mesh_maxtext_0_2_3_sets_where_tunix_sees_none(placements):
    """Tunix hands its placement the mesh `with mesh:` sets, empty under train_sft's `jax.set_mesh`: it placed nothing,
    and the counters' single-device sharding made jit compile the step again at step 2."""
    placed = placements["set_mesh"]
    assert placed["kinds"] == ["NamedSharding"] and placed["shardings"] == ["P('fsdp', None)"], placed
    assert placed["same_values"] and placed["after"] - placed["before"] <= 64, placed


def test_the_patch_refuses_code_it_was_not_written_for(placements):
    """A changed source or another version stops the launcher with the fix, and Tunix stays as it was."""
    said = placements["guard"]
    assert said["patched"] is False
    assert "differs from the code workload/launch/optimizer_placement.py was written for" in said["changed code"]
    assert said["another version"].startswith("google-tunix 0.1.7's PeftTrainer._shard_optimizer is not 0.0.1's")
    assert all("\n" not in line for line in (said["changed code"], said["another version"]))
