"""`python -m rehearsal --lora` (rehearsal/cli.py `LORA`): the rehearsal stack's settings with a LoRA run's over
them are settings the program takes, and they reach every phase the way a user's stack file would bring them."""

from __future__ import annotations

import json

from infra.config.stack_file import read_stack_config
from rehearsal.__main__ import CONFIG
from rehearsal.cli import LORA
from rehearsal.engine import run_program
from workload.core.config import PipelineConfig
from workload.core.contract import PIPELINE_ENV


def test_the_lora_rehearsal_trains_an_adapter_in_tunixs_loop(gcloud_home, monkeypatch):
    monkeypatch.setenv("HOME", str(gcloud_home))
    public_key = (gcloud_home / ".ssh/google_compute_engine.pub").read_text().strip()
    stack = run_program({**read_stack_config(CONFIG), "tpu-sft:sshPublicKey": public_key, **LORA}, preview=True)
    settings = [
        json.loads(c.inputs["environment"][PIPELINE_ENV])
        for c in stack.of_type("command:local:Command")
        if PIPELINE_ENV in c.inputs.get("environment", {})
    ]
    trained = [PipelineConfig.from_mapping(s) for s in settings if "tuning" in s]
    assert trained and all(c.adapter is not None and c.trainer == "tunix" for c in trained)
