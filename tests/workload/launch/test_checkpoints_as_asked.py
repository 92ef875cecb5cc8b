"""A run that asks for no checkpoints gets none (workload/launch/checkpoints_as_asked.py): MaxText 0.2.3's train_sft
hands Tunix its checkpoint directory whatever `enable_checkpointing` says, and Tunix saves wherever it has one.
Real MaxText config parsing and a real Tunix trainer on CPU; on the chip, bench/tpu/runs/ records no checkpoint
written by any case that asked for none."""

import json
import os
import subprocess

from tests.workload.tiny_run import REPO


def directories(maxtext_python: str, output) -> dict:
    find = "from workload.preflight.__main__ import train_sft_file; print(train_sft_file())"
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu"}
    program = subprocess.run([maxtext_python, "-c", find], env=env, capture_output=True, text=True, check=True)
    script = REPO / "tests" / "workload" / "launch" / "checkpoints_asked.py"
    done = subprocess.run(
        [maxtext_python, str(script), program.stdout.strip(), str(output)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_the_trainer_gets_a_checkpoint_directory_only_when_checkpoints_are_asked_for(maxtext_python, tmp_path):
    found = directories(maxtext_python, tmp_path)
    unpatched = found["unpatched"]["false"]
    assert unpatched.startswith(str(tmp_path))  # MaxText's train_sft hands Tunix a directory though none was asked for
    assert found["patched"] == {"false": None, "true": unpatched}
