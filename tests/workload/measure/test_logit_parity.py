"""Verification at logits level: the trained MaxText checkpoint and its export give the same next-token
distributions (KL per position under a bound), and a broken export fails verification with one line."""

import json
import os
import shutil
import subprocess

from tests.workload.tiny_run import REPO, TINY_SETTINGS
from workload.core.config import PipelineConfig
from workload.launch.exit_reason import failure_cause
from workload.measure.logit_parity import KL_BOUND
from workload.run import commands
from workload.run.layout import Layout

CONFIG = PipelineConfig.from_mapping(TINY_SETTINGS)


def _layout(tiny_pipeline):
    return Layout(
        str(tiny_pipeline.work),
        str(tiny_pipeline.out),
        CONFIG.model,
        commands.run_name(CONFIG),
        runs_dir=tiny_pipeline.runs_url,
    )


def _run(argv, env):
    return subprocess.run(
        argv,
        env={**os.environ, **env, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1"},
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        stdin=subprocess.DEVNULL,
    )


def _one_line_cause(done):
    return failure_cause(done.stderr.splitlines(keepends=True)[-20:], done.returncode)


def test_the_export_matches_the_checkpoint_within_the_bound(tiny_pipeline):
    verify = tiny_pipeline.finished.summary["verify"]
    assert verify["ok"] and verify["kl_bound"] == KL_BOUND["tiny"] == 1e-3
    assert 0 <= verify["logits_kl_mean"] <= verify["logits_kl_max"] <= verify["kl_bound"]
    assert verify["logits_prompts"] == 4 and verify["logits_positions"] > 32  # past the sliding window
    # The KL bound is the check; the most likely token may still differ where the two likeliest are within
    # rounding of each other on the random tiny model (4 December, Tunix 0.1.7: 59 of 60, KL max 6.6e-6).
    assert verify["logits_top1_agreement"] >= 0.95
    kept = json.loads((tiny_pipeline.out / tiny_pipeline.finished.summary["run_name"] / "verify.json").read_text())
    assert kept["logits_kl_max"] == verify["logits_kl_max"]  # the figure stays with the model


def test_a_transposed_weight_fails_verification_with_one_line(tiny_pipeline, maxtext_python, tmp_path):
    """Same shapes, finite, loads and generates: only the logits can tell."""
    layout = _layout(tiny_pipeline)
    broken = tmp_path / "broken-export"
    shutil.copytree(layout.export_dir, broken)
    subprocess.run(
        [
            maxtext_python,
            str(REPO / "tests" / "workload" / "measure" / "transpose_weight.py"),
            str(broken),
            "layers.0.self_attn.o_proj.weight",
        ],
        check=True,
        capture_output=True,
        timeout=300,
    )
    command = commands.logit_parity(
        CONFIG,
        layout,
        commands.OnHost(python=maxtext_python),
        export_dir=str(broken),
        result=str(tmp_path / "parity.json"),
    )
    done = _run(command.argv, command.env)
    assert done.returncode == 1, done.stderr[-3000:]
    cause = _one_line_cause(done)
    assert (
        cause.startswith(
            "VerificationError: the export's next-token distribution differs from the MaxText checkpoint's: max KL "
        )
        and "> bound 0.001" in cause
        and "\n" not in cause
    )
    result = json.loads((tmp_path / "parity.json").read_text())
    assert result["ok"] is False and result["logits_kl_max"] > 10 * result["kl_bound"]


def test_the_exact_gelu_of_maxtext_2867_fails_verification_with_one_line(tiny_pipeline, maxtext_python, tmp_path):
    layout = _layout(tiny_pipeline)
    broken = tmp_path / "gelu-export"
    shutil.copytree(layout.export_dir, broken)
    config = json.loads((broken / "config.json").read_text())
    config["text_config"]["hidden_activation"] = "gelu"
    (broken / "config.json").write_text(json.dumps(config))
    done = _run(
        [maxtext_python, "-m", "workload.measure.verify_hf", str(broken), str(tmp_path / "verify.json")],
        {"HF_HOME": str(tmp_path / "hf")},
    )
    assert done.returncode == 1, done.stderr[-3000:]
    assert _one_line_cause(done) == (
        "VerificationError: hidden_activation is 'gelu', not 'gelu_pytorch_tanh' (maxtext#2867); re-run the export, "
        "which corrects it"
    )


def test_the_full_profile_checks_against_maxtexts_own_gemma3_bound():
    config = PipelineConfig.from_mapping({"profile": "full", "steps": 1000})
    layout = Layout("/dev/shm/tpu-sft", "/mnt/out", config.model, commands.run_name(config))
    argv = commands.logit_parity(config, layout).argv
    assert argv[argv.index("--max-kl") + 1] == "0.015"
    assert f"load_parameters_path={layout.checkpoint(999)}/items" in argv and layout.export_dir in argv
    assert "hardware=cpu" not in argv and "dtype=float32" in argv


UNBOUNDED = """
import json
import numpy as np
from workload.measure.logit_parity import KL_BOUND, _agreement
reference, candidate = [np.array([[0.0, 5.0, 0.0]])], [np.array([[5.0, 0.0, 0.0]])]
bounded, problems = _agreement(reference, candidate, KL_BOUND["tiny"], "", "the export")
unbounded, none = _agreement(reference, candidate, None, "", "the export")
print(json.dumps({"bounded": bounded, "problems": problems, "unbounded": unbounded, "none": none}))
"""


def test_unbounded_the_figures_are_measured_and_nothing_is_judged(maxtext_python):
    """A QLoRA run's merged model against its quantised base (workload/run/commands.py `quantised_logit_distance`):
    a distance that no bound holds, reported as the bounded check's figures are."""
    done = _run([maxtext_python, "-c", UNBOUNDED], {"JAX_PLATFORMS": "cpu"})
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["problems"] and not found["none"]
    assert found["unbounded"] == found["bounded"] and found["unbounded"]["logits_kl_max"] > 4
