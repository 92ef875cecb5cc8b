"""What `pulumi up` would run actually runs, re-attaches after an interruption, redoes nothing the second
time, and never shows the HF token."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from infra.tasks import last_json_line
from rehearsal.engine import plain
from tests.e2e.pulumi_up import TOKEN


def _summary(executed) -> dict:
    return last_json_line(executed.stdout)


def test_phases_run_in_order_and_the_model_is_kept_and_verified(pulumi_up):
    names = [c.name.rsplit("-", 1)[1] for c in pulumi_up.commands]
    assert names == ["token", "bootstrap", "convert", "train", "export"]
    export = _summary(pulumi_up.first[pulumi_up.phase("export")])
    assert export["ok"] is True
    assert export["final_step"] == 20  # the rehearsal stack's steps
    assert export["verify"]["ok"] is True
    kept = Path(export["kept_dir"])
    assert kept.is_relative_to(pulumi_up.directory / "disk")  # on the data disk, not the scratch
    assert (kept / "loss.png").stat().st_size > 0
    assert (kept / "hf-model" / "config.json").exists()
    assert (kept / "samples.md").read_text().count("\n| ") == export["verify"]["samples"]["prompts"] + 1  # + head


def test_the_run_ends_saying_whether_the_held_out_loss_fell(pulumi_up):
    executed = pulumi_up.first[pulumi_up.phase("export")]
    export = _summary(executed)
    assert export["learned"] is True and export["eval_loss_final"] < export["eval_loss_first"]
    lines = executed.stdout.splitlines()
    assert lines[-2].startswith("✓ held-out loss ") and lines[-2].endswith(": it learned")  # the summary is last


def test_progress_is_shown_while_a_phase_runs(pulumi_up):
    train = pulumi_up.first[pulumi_up.phase("train")].stdout
    assert "▶ train" in train or "train step " in train
    assert "train step " in pulumi_up.interrupted_output + train
    assert "loss " in pulumi_up.interrupted_output + train


def test_interrupted_train_is_reattached_not_restarted(pulumi_up):
    job = pulumi_up.train_job_before_kill
    resumed = pulumi_up.first[pulumi_up.phase("train")].stdout
    assert f"train: job {job} on 127.0.0.1 (running)" in resumed
    assert [d for d in pulumi_up.job_dirs() if d.startswith("train-")] == [job]
    log = (pulumi_up.host.state_dir / "jobs" / job / "log").read_text()
    starts = [e for e in map(json.loads, log.splitlines()) if e.get("phase") == "train" and e.get("status") == "start"]
    assert len(starts) == 1  # one training run, followed twice


def test_second_up_redoes_nothing(pulumi_up):
    jobs_after_first = pulumi_up.job_dirs()
    bootstrap = pulumi_up.second[pulumi_up.phase("bootstrap")]
    assert "already installed" in bootstrap.stdout
    for phase in ("convert", "train", "export"):
        again = pulumi_up.second[pulumi_up.phase(phase)]
        assert again.returncode == 0
        assert f"{phase}: job {phase}-" in again.stdout and "on 127.0.0.1 (succeeded)" in again.stdout
        assert _summary(again) == _summary(pulumi_up.first[pulumi_up.phase(phase)])
        assert again.seconds < 30
    assert pulumi_up.job_dirs() == jobs_after_first  # no new job was started


def test_a_new_vm_with_the_kept_model_converts_and_trains_nothing(pulumi_up):
    first_export = _summary(pulumi_up.first[pulumi_up.phase("export")])
    for phase in ("convert", "train", "export"):
        run = pulumi_up.new_vm[pulumi_up.phase(phase)]
        assert run.returncode == 0, run.stdout + run.stderr[-2000:]
        reason = f"the model kept in {first_export['kept_dir']} has these inputs and matches its manifest"
        assert f"skipped: {reason}" in run.stdout
        summary = _summary(run)
        assert summary["reused_kept_model"] is True and summary["logs"] == []
        for fact in ("final_step", "final_loss"):  # train's facts, which the convert job does not report
            assert summary.get(fact) == (None if phase == "convert" else first_export[fact]), fact
    assert not (pulumi_up.new_vm_host.directory / "scratch" / "logs").exists()  # no MaxText process ran there


def test_token_reaches_the_host_only_as_a_0600_file(pulumi_up):
    secret = pulumi_up.host.state_dir / "secrets" / "hf_token"
    assert secret.read_text() == TOKEN
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600


def test_token_appears_nowhere_else(pulumi_up):
    outputs = [pulumi_up.interrupted_output] + [
        e.stdout + e.stderr for e in (*pulumi_up.first.values(), *pulumi_up.second.values(), *pulumi_up.new_vm.values())
    ]
    assert not [o for o in outputs if TOKEN in o], "a command printed the token"
    assert pulumi_up.command_lines_holding_token == [], "the token was on a command line"
    assert pulumi_up.ps_samples > 100  # sampled all through the run
    readable = [r.inputs for r in pulumi_up.stack.resources]
    assert TOKEN not in json.dumps([plain(i) for i in readable]), "the token is in plain stack state"
    files = [  # logs, job scripts, scratch, the kept model; not the linked MaxText venv
        Path(root, name) for root, _, names in os.walk(pulumi_up.directory) for name in names if name != "hf_token"
    ]
    leaking = [p for p in files if p.is_file() and TOKEN.encode() in p.read_bytes()]
    assert leaking == [], f"the token is in {leaking}"
