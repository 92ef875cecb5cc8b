"""The fast tier passes for anyone (issue 74), whose venv may live outside the checkout: the rehearsal runs a recorded
command that names the project's Python (the contract's `.venv/bin/python`, which the product keeps: Pulumi.yaml's
virtualenv) with the Python running it (rehearsal/run.py `with_this_python`).

The suite itself runs from the checkout's .venv, as root, where `.venv/bin/python` is found, so it could not see that
every test through the rehearsal's APIs-ready wait failed for a contributor with `/bin/sh: 1: .venv/bin/python: not
found`. Here the program's APIs-ready command runs from a view of the checkout without its venvs."""

from __future__ import annotations

import json

from rehearsal import run
from rehearsal.engine import ROOT
from workload.core.contract import APIS_READY_ENV, PROJECT_PYTHON, apis_ready_command


def test_a_recorded_command_runs_from_a_checkout_without_its_venv(tmp_path, monkeypatch):
    assert apis_ready_command().startswith(PROJECT_PYTHON + " ")  # what pulumi-command runs on a user's machine
    checkout = tmp_path / "checkout"
    checkout.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in (".venv", ".maxtext-venv"):
            (checkout / entry.name).symlink_to(entry)
    monkeypatch.setattr(run, "ROOT", checkout)
    asked = {"project": "p", "network": "default", "apis": ["compute.googleapis.com"]}
    done = run.wait_for_the_apis(
        run.Recorded("apis-ready", apis_ready_command(), {APIS_READY_ENV: json.dumps(asked)}), delay_s=0.0
    )
    assert done.returncode == 0 and done.stdout.startswith("apis-ready: "), done.stderr
