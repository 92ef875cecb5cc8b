"""The bench's QLoRA case runs its path on the CPU (bench/tpu/cases/cpu-smoke.json, a one-layer Gemma 3 shape):
the pipeline's quantising launcher on MaxText's unscanned NNX decoder, the decoder the chip's 34 layers need. Before
workload/launch/quantised_base.py kept the quantised weights an unscanned layer's copy made, its first step stopped
at `self.kernel[...]` ("KeyError: Ellipsis"), which would have cost a device call to learn."""

import json
import os
import subprocess

from tests.workload.tiny_run import REPO


def test_the_qlora_case_trains_on_an_unscanned_decoder(maxtext_python, tmp_path):
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "JAX_PLATFORMS": "cpu",
        "DECOUPLE_GCLOUD": "TRUE",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
    }
    out = tmp_path / "out"
    cases = ["bench/tpu/cases/cpu-smoke.json", "--only", "smoke-qlora-int8-unscanned"]
    command = [maxtext_python, "-m", "bench.tpu.run", *cases, "--out", str(out), "--case-timeout", "600"]
    done = subprocess.run(command, env=env, cwd=REPO, capture_output=True, text=True, timeout=900)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    [result] = json.loads((out / "results.json").read_text())["cases"]
    log = (out / "logs" / "smoke-qlora-int8-unscanned.log").read_text()
    assert result["outcome"] == "trained", log[-3000:]
    assert "the frozen weights LoRA wraps quantised to int8" in log
    assert result["steps_logged"] == [1, 4]
