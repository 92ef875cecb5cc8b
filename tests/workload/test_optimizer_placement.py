"""Tunix's optimizer state placed one array at a time (workload/launch/optimizer_placement.py): the most a device holds
beyond the state is one of its arrays, where Tunix 0.1.7's own placement holds all of it twice. Real Tunix and
flax on two CPU devices (tests/workload/optimizer_placement_live.py); the chip's own figures are in bench/RESULTS.md."""

import json
import os
import subprocess

import pytest

from tests.workload.tiny_run import REPO
from workload.launch import optimizer_placement


def placed(maxtext_python: str, how: str) -> dict:
    done = subprocess.run(
        [maxtext_python, str(REPO / "tests" / "workload" / "optimizer_placement_live.py"), how],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_tunix_holds_the_optimizer_state_twice_while_it_places_it(maxtext_python):
    tunix = placed(maxtext_python, "tunix")
    assert tunix["largest"] - tunix["before"] >= tunix["state_bytes"], tunix


def test_the_patched_placement_holds_one_copy_and_one_array_at_most(maxtext_python):
    patched = placed(maxtext_python, "patched")
    assert patched["largest"] - patched["before"] <= patched["largest_array_bytes"] + 64, patched
    assert patched["after"] - patched["before"] <= 64, patched  # a few bytes of bookkeeping arrays at most
    assert patched["same_values"] and patched["shardings"] == ["P('fsdp', None)"], patched


@pytest.mark.parametrize("version_says", ["another version", "changed code"])
def test_the_patch_refuses_code_it_was_not_written_for(maxtext_python, version_says):
    """The guard runs where Tunix is installed: a changed digest or version stops the launcher with the fix."""
    digest = "0" * 64 if version_says == "changed code" else optimizer_placement.TUNIX_SHARD_OPTIMIZER_SHA256
    script = (
        "from workload.core import lock\n"
        "from workload.launch import optimizer_placement as p\n"
        f"p.TUNIX_SHARD_OPTIMIZER_SHA256 = {digest!r}\n"
        + ("lock.versions()['google-tunix'] = '0.0.1'\n" if version_says == "another version" else "")
        + "p.patch_tunix()\n"
    )
    done = subprocess.run(
        [maxtext_python, "-c", script], env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True
    )
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert "PatchedCodeChanged" in last and "workload/launch/optimizer_placement.py" in last, last
