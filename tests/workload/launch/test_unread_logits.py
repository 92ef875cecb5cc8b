"""The logits Tunix's train step returned and nothing read are gone from its outputs (workload/launch/unread_logits.py),
and nothing else changed: real MaxText 0.2.3 and Tunix 0.1.7 on the tiny model, CPU, the same start and batch."""

import json
import os
import subprocess
from pathlib import Path

from tests.workload.tiny_run import REPO
from workload.core.config import PipelineConfig
from workload.run import commands
from workload.run.layout import Layout


def test_the_step_without_the_logits_trains_the_same_and_returns_less(maxtext_python, tiny_converted, tmp_path):
    config = PipelineConfig(profile="tiny", trainer="tunix")  # the logits are Tunix's step's
    layout = Layout(str(tmp_path), str(tmp_path / "out"), config.model, commands.run_name(config))
    Path(layout.tiny_dir).symlink_to(tiny_converted / "tiny")  # the tiny model's config, read only
    train = commands.train_sft(config, layout)
    arguments = commands.trainer_arguments(train.argv)
    done = subprocess.run(
        [maxtext_python, str(REPO / "tests" / "workload" / "launch" / "logits_step.py"), *arguments],
        cwd=REPO,
        env={**os.environ, **train.env, "PYTHONPATH": str(REPO)},
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.splitlines()[-1])
    kept, dropped = result["kept"], result["dropped"]
    assert "intermediate_outputs" in kept["aux_keys"] and "intermediate_outputs" not in dropped["aux_keys"]
    # The same computation: bit for bit the same losses, gradient norms and weights after three updates.
    for key in ("losses", "grad_norms", "weights_sha256"):
        assert dropped[key] == kept[key], (key, kept, dropped)
    assert kept["losses"][-1] != kept["losses"][0], kept  # the steps trained
    # And the compiled step's outputs shrink by the float32 logits, batch × sequence × vocabulary.
    assert kept["output_bytes"] - dropped["output_bytes"] >= kept["logits_bytes"], (kept, dropped)
