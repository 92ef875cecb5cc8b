"""`scripts/tpu-sft publish` once autostop has deleted the VM: the kept model is published from the checkpoint bucket
by this machine, through the same `python -m workload.publish` the `…-publish` task runs on the VM (so the same
checks and gate), to the Hub stand-in and to Cloud Storage. No VM answers SSH, and no Google API but Cloud Storage is
asked: the `gcloud` here records every call, and there is none, so no VM is asked for, let alone made."""

import json
import os
import subprocess
import sys

import pytest

from remote.stack.publish_here import transfer_line
from tests.hub_upload_standin import HubStandin
from tests.remote.stack_commands import tpu_sft
from tests.ssh_testbed import free_port
from tests.workload.eval.reports import write_report
from tests.workload.publish.test_publish import (
    WORSE,
    kept,  # noqa: F401 (a fixture: a real tiny export, kept)
)

DISK = "/mnt/tpu-sft-data/tpu-sft"
WRITE_TOKEN = "hf_" + "PublishHere" * 3


@pytest.fixture
def vm_gone(recorded, tmp_path):
    target = json.loads(recorded["target"]) | {
        "host": "127.0.0.1",
        "port": free_port("127.0.0.1"),
        "known_hosts": str(tmp_path / "known_hosts"),
        "connect_timeout": 3,
    }
    return {**recorded, "target": json.dumps(target)}


@pytest.fixture
def hub():
    with HubStandin(token=WRITE_TOKEN) as standin:
        yield standin


def test_after_autostop_the_kept_model_is_published_from_the_bucket_with_no_vm(
    maxtext_python,
    gcs,
    hub,
    vm_gone,
    kept,  # noqa: F811
    tmp_path,
):
    gcs.upload(kept, f"kept/{kept.name}")  # the VM's copy, as keep made it before autostop deleted the VM
    outputs = {**vm_gone, "modelDir": f"{DISK}/{kept.name}"}
    env = {
        "STORAGE_EMULATOR_HOST": gcs.url,  # this machine's own credentials: the project's owner
        "TPU_SFT_PUBLISH_PYTHON": maxtext_python,
        "HF_ENDPOINT": hub.endpoint,
        "HF_WRITE_TOKEN": WRITE_TOKEN,
    }
    args = ("publish", "--hub", "team/gemma-sft", "--gcs", gcs.gs("published/gemma-sft"))
    calls = tmp_path / "gcloud-calls"
    (tmp_path / "bin").mkdir()
    (tmp_path / "bin" / "gcloud").write_text(f'#!/bin/sh\necho "$@" >> {calls}\necho ya29.standin\n')
    (tmp_path / "bin" / "gcloud").chmod(0o755)
    done = tpu_sft(tmp_path, outputs, *args, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].startswith(f"publish: {gcs.gs('kept', kept.name)} → from this machine, no VM: ")
    assert " GB through this machine, in and out: ~" in lines[0] and lines[0].endswith(" min at 100 Mbit/s")
    assert f"✓ published to {gcs.gs('published/gemma-sft')}: 6 file(s) sent" in lines
    assert "✓ published to hf://team/gemma-sft: 6 file(s) sent" in lines
    assert "model.safetensors" in hub.repos["team/gemma-sft"]["files"]
    assert WRITE_TOKEN not in done.stdout + done.stderr
    assert not calls.exists()  # no Compute Engine call: no VM asked for
    again = tpu_sft(tmp_path, outputs, *args, env=env, timeout=300)
    assert again.returncode == 0 and again.stdout.count("already there, nothing sent") == 2, again.stdout


def test_no_python_to_publish_with_is_one_line(gcs, vm_gone, tmp_path):
    env = {"STORAGE_EMULATOR_HOST": gcs.url, "TPU_SFT_PUBLISH_PYTHON": str(tmp_path / "none"), "HF_WRITE_TOKEN": "x"}
    done = tpu_sft(tmp_path, vm_gone, "publish", "--hub", "team/m", env=env)
    assert done.returncode == 2
    assert (
        done.stderr.strip()
        .splitlines()[-1]
        .endswith(
            "run scripts/maxtext-venv, or set $TPU_SFT_PUBLISH_PYTHON to a Python that has huggingface_hub, "
            "google-cloud-storage and gcsfs"
        )
    )


def test_the_time_line_counts_the_model_in_from_the_bucket_and_out_again():
    """gemma3-4b's kept model, ~7.8 GB in bfloat16 (infra/pricing/cost.py keptModelCost)."""
    assert transfer_line(7_760_000_000) == "7.8 GB through this machine, in and out: ~21 min at 100 Mbit/s"
    assert transfer_line(7_760_000_000, 1000) == "7.8 GB through this machine, in and out: ~2 min at 1000 Mbit/s"


def test_the_pulumi_up_task_names_the_model_reads_the_token_on_stdin_and_holds_the_gate(
    maxtext_python,
    gcs,
    hub,
    kept,  # noqa: F811
    tmp_path,
):
    """What the `…-publish` task of a `pulumi up` with no VM runs (infra/resources/bucket_publish.py): the kept
    model's URL given (the stack's outputs are being written), the stack's write token on stdin, and the stack's
    eval gate, which `python -m workload.publish` holds: a fine-tune worse than its base is refused under `block`, and
    nothing is sent; under `warn` it is published, with the finding."""
    write_report(kept, WORSE)
    gcs.upload(kept, f"kept/{kept.name}")
    env = {
        "PATH": os.environ["PATH"],
        "STORAGE_EMULATOR_HOST": gcs.url,
        "TPU_SFT_PUBLISH_PYTHON": maxtext_python,
        "HF_ENDPOINT": hub.endpoint,
    }
    argv = [sys.executable, "-m", "remote.stack", "publish", "--model", gcs.gs("kept", kept.name)]
    argv += ["--hub", "team/gated", "--token-stdin", "--eval-gate", "block", "--eval-margin", "2"]
    done = subprocess.run(argv, input=WRITE_TOKEN + "\n", capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode != 0
    assert "✗ publish: " in done.stdout and "team/gated" not in hub.repos
    assert WRITE_TOKEN not in done.stdout + done.stderr
    argv[argv.index("block")] = "warn"
    done = subprocess.run(argv, input=WRITE_TOKEN + "\n", capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "✓ published to hf://team/gated: 6 file(s) sent" in done.stdout
    assert "⚠ published with tpu-sft:evalGate warn, although the fine-tuned model" in done.stdout
    assert json.loads(done.stdout.splitlines()[-1])["ok"]
