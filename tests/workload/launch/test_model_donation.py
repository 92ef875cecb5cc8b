"""Tunix's train step given the model's buffers too (workload/launch/model_donation.py): the compiled step writes the
model's outputs over its inputs, where Tunix 0.1.7's own jit writes every weight anew, and it trains the same.
Real Tunix and flax on the CPU (model_donation_live.py); what it saves on the chip is in bench/RESULTS.md."""

import json
import os
import subprocess

import pytest

from tests.workload.tiny_run import REPO


@pytest.fixture(scope="module")
def trained(maxtext_python) -> dict:
    done = subprocess.run(
        [maxtext_python, str(REPO / "tests" / "workload" / "launch" / "model_donation_live.py")],
        env={**os.environ, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_tunix_own_step_copies_the_model_every_step(trained):
    tunix = trained["tunix"]
    assert not tunix["frozen_given"] and not tunix["adapter_given"], tunix
    assert tunix["aliased_bytes"] < tunix["model_bytes"], tunix


def test_the_patched_step_writes_the_model_over_its_own_buffers(trained):
    patched = trained["patched"]
    assert patched["frozen_given"] and patched["adapter_given"], patched
    assert patched["aliased_bytes"] >= patched["model_bytes"], patched


def test_both_steps_train_alike_and_leave_the_frozen_weight_as_it_was(trained):
    tunix, patched = trained["tunix"], trained["patched"]
    assert patched["loss_after"] == tunix["loss_after"] and patched["adapter_after"] == tunix["adapter_after"]
    assert tunix["adapter_after"] != 0.0  # the adapter trained: it starts at zero
    assert tunix["frozen_unchanged"] and patched["frozen_unchanged"]


def test_the_patch_refuses_code_it_was_not_written_for(trained):
    said = trained["guard"]
    assert said["patched"] is False
    assert "differs from the code workload/launch/model_donation.py was written for" in said["changed code"]
    assert said["another version"].startswith("google-tunix 0.1.7's PeftTrainer.jit_train_and_eval_step is not 0.0.1's")
