"""`python -m workload` as a user or the remote CLI calls it (no MaxText needed for these)."""

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def workload(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "workload", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, **(env or {})},
    )


def test_commands_prints_the_three_seed_steps_copy_pasteable(tmp_path):
    config = tmp_path / "settings.json"
    config.write_text(json.dumps({"steps": 10, "runName": "demo"}))
    done = workload("commands", "--config", str(config), "--hostname", "my-vm")
    assert done.returncode == 0, done.stderr
    blocks = done.stdout.strip().split("\n\n")
    assert [b.splitlines()[0] for b in blocks] == ["# convert", "# train", "# export"]
    assert "export TPU_NAME=my-vm" in blocks[1] and "    steps=10 \\" in blocks[1]
    assert "python3 -m maxtext.checkpoint_conversion.to_huggingface \\" in blocks[2]
    # MaxText's own loop, the default, names the state after update 10 checkpoint 9 (workload/core/trainer_loop.py)
    assert "/dev/shm/gemma3-4b/post-train/demo/checkpoints/9/items" in blocks[2]


def test_run_with_bad_settings_ends_with_one_line_and_the_summary(tmp_path):
    config = tmp_path / "settings.json"
    config.write_text(json.dumps({"steps": 0}))
    done = workload(
        "run", "--config", str(config), "--work-dir", str(tmp_path / "w"), "--output-dir", str(tmp_path / "o")
    )
    assert done.returncode == 2
    events = [json.loads(line) for line in done.stdout.splitlines()]
    assert events[-1]["event"] == "summary" and events[-1]["failed_step"] == "setup"
    assert events[-1]["error"] == "tpu-sft:steps: must be at least 1, got 0. Fix: pulumi config set tpu-sft:steps 1000"
    assert not (tmp_path / "w").exists()


def test_run_refuses_a_token_file_others_can_read_without_showing_the_token(tmp_path):
    config, token = tmp_path / "settings.json", tmp_path / "token"
    config.write_text("{}")
    token.write_text("hf_DoNotPrintMe")
    token.chmod(0o640)
    done = workload(
        "run",
        "--config",
        str(config),
        "--work-dir",
        str(tmp_path / "w"),
        "--output-dir",
        str(tmp_path / "o"),
        "--hf-token-file",
        str(token),
    )
    assert done.returncode == 2
    assert "chmod 600" in json.loads(done.stdout.splitlines()[-1])["error"]
    assert "hf_DoNotPrintMe" not in done.stdout + done.stderr
