"""The preflight compiles a LoRA run's step for the machines below a v6e-8: a v6e-1 (`ct6e-standard-1t`, one chip,
topology 1x1) and a v6e-4 (`ct6e-standard-4t`, 2x2), with libtpu's compiler for each topology and no TPU, as
`scripts/preflight tpu-sft:acceleratorType=…` does before the preview prices the run there (infra/plan/machines.py).
The small gemma3 of test_preflight.py, in .maxtext-venv."""

from __future__ import annotations

import json
import subprocess

import pytest

from tests.workload.preflight.test_preflight import SMALL_GEMMA3, SMALL_SETTINGS, _ended
from workload.core.accelerators import ACCELERATORS

SUB_HOST = ("v6e-1", "v6e-4")
GIB = 2**30


@pytest.fixture(scope="module")
def records(maxtext_python, tmp_path_factory) -> dict[str, dict]:
    directory = tmp_path_factory.mktemp("sub-host")

    def preflight(accelerator: str) -> subprocess.Popen:
        settings = directory / f"{accelerator}.json"
        lora = {**SMALL_SETTINGS, "trainer": "tunix", "tuning": "lora", "acceleratorType": accelerator}
        settings.write_text(json.dumps(lora))
        argv = [maxtext_python, "-m", "workload.preflight", "--settings", str(settings), "--usd-per-chip-hour", "2.7"]
        return subprocess.Popen(argv + SMALL_GEMMA3, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    running = {accelerator: preflight(accelerator) for accelerator in SUB_HOST}
    done = {accelerator: _ended(process) for accelerator, process in running.items()}
    for accelerator, ended in done.items():
        assert ended.returncode == 0, f"{accelerator}: {ended.stderr[-3000:]}"
    return {accelerator: json.loads(ended.stdout.strip().splitlines()[-1]) for accelerator, ended in done.items()}


@pytest.mark.parametrize("accelerator", SUB_HOST)
def test_a_lora_step_compiles_for_the_machines_below_a_v6e_8(records, accelerator):
    record = records[accelerator]
    chips = ACCELERATORS[accelerator].chips
    assert record["fits"] and record["accelerator"] == accelerator
    # A v6e chip's HBM as the compiler allows a program: 31.25 GiB, whatever the topology.
    assert record["hbm_limit_bytes_per_chip"] == pytest.approx(31.25 * GIB, rel=0.01)
    assert record["tokens_per_step"] == 128 * chips  # one sequence of 128 a chip
    assert record["live_per_chip"]["frozen_weights"] > 0  # the adapter's step: the base is frozen
    assert record["step_time"]["step_s"] > 0 and record["bounds"]["usd_at_least"] > 0
