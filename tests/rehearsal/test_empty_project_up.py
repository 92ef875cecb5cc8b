"""The rehearsal's `pulumi up` in an empty project (rehearsal/run.py `record`): the program's APIs-ready task runs after
the enables against rehearsal/google_apis.py, whose APIs refuse every call for a while after being enabled, and the
post-deploy tasks follow only once it has seen them answer; a propagation that never ends stops it in one line."""

from __future__ import annotations

import json

import pytest

from infra.config.stack_file import read_stack_config
from rehearsal.__main__ import CONFIG
from rehearsal.engine import run_program
from rehearsal.google_apis import NEVER
from rehearsal.run import PROPAGATION_S, Recorded, record, wait_for_the_apis
from remote.pipeline import apis_ready
from workload.core.contract import apis_ready_command


def test_the_rehearsals_pulumi_up_waits_out_the_propagation_of_its_empty_project(gcloud_home, monkeypatch):
    """rehearsal/run.py `record`: the program's own APIs-ready task, run as `pulumi up` runs it after the enables,
    against a project whose APIs refuse every call for PROPAGATION_S after being enabled."""
    monkeypatch.setenv("HOME", str(gcloud_home))
    public_key = (gcloud_home / ".ssh/google_compute_engine.pub").read_text().strip()
    _, commands = record(CONFIG, {"tpu-sft:sshPublicKey": public_key})
    assert all(c.create != apis_ready_command() for c in commands)  # run already; the rest are the post-deploy tasks
    stack = run_program({**read_stack_config(CONFIG), "tpu-sft:sshPublicKey": public_key}, preview=False)
    [wait] = [
        Recorded.of(c) for c in stack.of_type("command:local:Command") if c.inputs["create"] == apis_ready_command()
    ]
    done = wait_for_the_apis(wait)
    assert done.seconds >= PROPAGATION_S and done.stdout.startswith("apis-ready: ")
    with pytest.raises(RuntimeError, match="still do not answer"):
        wait_for_the_apis(
            Recorded(
                wait.name,
                wait.create,
                {
                    **wait.environment,
                    apis_ready.ENV: json.dumps({**json.loads(wait.environment[apis_ready.ENV]), "wait_s": 0.5}),
                },
            ),
            delay_s=NEVER,
        )
