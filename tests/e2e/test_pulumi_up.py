"""What `pulumi up` would run actually runs, goes on without the laptop, re-attaches when it is back, redoes
nothing the second time, and never shows the HF token."""

from __future__ import annotations

import io
import json
import os
import stat
from pathlib import Path

import pytest

from infra.resources.tasks import last_json_line
from rehearsal.engine import plain
from remote.pipeline.part import PartDone, PartPrinter
from remote.ssh.errors import EXIT_UNREACHABLE
from tests.e2e.pulumi_up import TOKEN
from workload.core.contract import PHASE_UNTIL, RUN_STEPS
from workload.run.fingerprint import manifest_mismatches
from workload.run.phase_outcome import eval_facts


def _summary(executed) -> dict:
    return last_json_line(executed.stdout)


def test_phases_run_in_order_and_the_model_is_kept_and_verified(pulumi_up):
    names = [c.name.rsplit("-", 1)[1] for c in pulumi_up.commands]
    assert names == ["token", "bootstrap", "run", "convert", "train", "export", "eval"]
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


def test_the_eval_task_shows_both_models_scores_on_the_kept_model(pulumi_up):
    """scripts/rehearse's eval line: the fixture tasks scored by lm-eval's own code against the loopback server
    (docs/eval.md, "The rehearsal's tasks"), the base model and the fine-tuned one."""
    executed = pulumi_up.first[pulumi_up.phase("eval")]
    summary = _summary(executed)
    assert summary["ok"] is True and summary["until"] == "eval"
    lines = executed.stdout.splitlines()
    assert lines[-2].startswith("✓ eval: IFEval strict 0.40 → ") and " · GSM8K 0.00 → 0.00 (" in lines[-2]
    said = [e["message"] for e in _run_events(pulumi_up) if e["event"] == "progress"]  # the run went on alone
    assert any(m.startswith("serving the base model (chat_server): ") for m in said)
    assert any(m.startswith("serving the tuned model (chat_server): ") for m in said)
    report = Path(summary["eval"]["report"])
    assert report == Path(summary["kept_dir"]) / "eval" / "report.json" and report.is_file()
    assert [t["task"] for t in json.loads(report.read_text())["tasks"]] == ["ifeval", "gsm8k"]


def _run_events(pulumi_up) -> list[dict]:
    log = pulumi_up.host.state_dir / "jobs" / pulumi_up.run_job / "log"
    return [e for e in map(json.loads, log.read_text().splitlines())]


def test_progress_is_shown_while_a_phase_runs(pulumi_up):
    assert "▶ convert" in pulumi_up.closed_output  # live, until the laptop closed
    shown = io.StringIO()  # what the train task shows of the run as it goes: its own part only
    printer = PartPrinter("train", shown)
    with pytest.raises(PartDone):
        for event in _run_events(pulumi_up):
            printer.line(json.dumps(event))
    lines = shown.getvalue().splitlines()
    assert lines[0] == "▶ train" and any(line.startswith("train step 20/20 · loss ") for line in lines), lines
    assert not [line for line in lines if "convert" in line or "export" in line]
    assert printer.summary == _summary(pulumi_up.first[pulumi_up.phase("train")])


def test_a_closed_laptop_leaves_the_run_going_to_a_kept_model(pulumi_up):
    """Everything the rehearsal started was killed right after convert started, but the host: the run went on alone
    to the kept model and its manifest, and the commands run again after it re-attach to it, redo nothing, and
    print what the run printed for their part, as an uninterrupted `pulumi up` does."""
    job = pulumi_up.run_job
    assert f"convert: job {job} on 127.0.0.1 (running)" in pulumi_up.closed_output
    assert pulumi_up.run_exit == "0"
    export = _summary(pulumi_up.first[pulumi_up.phase("export")])
    assert pulumi_up.manifests_when_the_run_ended == [export["manifest"]]
    assert pulumi_up.job_dirs() == [job]  # the later commands started nothing
    events = _run_events(pulumi_up)
    starts = [e["phase"] for e in events if e["event"] == "phase" and e["status"] == "start"]
    assert starts == ["assets", "convert", "train", "export", "verify", "keep", "eval"]  # each step once
    printed = {e["until"]: e for e in events if e["event"] == "summary"}
    for phase, until in PHASE_UNTIL.items():
        again = pulumi_up.first[pulumi_up.phase(phase)]
        assert f"{phase}: job {job} on 127.0.0.1 (succeeded)" in again.stdout
        assert _summary(again) == printed[until]


def test_the_user_asks_the_stack_where_the_run_stands_while_alone_finished_and_gone(pulumi_up):
    """`scripts/tpu-sft status` and `logs` against the rehearsal's host, from the stack's recorded outputs (the
    `pulumi` CLI a stand-in, tests/remote/pulumi_standin.py): the run going on alone, the run finished, the host
    gone. Cancelling a run: tests/slice/test_slice_rehearsal.py (a real one) and
    tests/remote/stack/test_stack_commands.py."""
    job, asked = pulumi_up.run_job, pulumi_up.asked
    export = _summary(pulumi_up.first[pulumi_up.phase("export")])
    running = asked["status running"]
    assert running.returncode == 0, running.stderr
    vm, run = running.stdout.splitlines()
    assert vm == "VM tpu-sft-rehearsal: running (answers SSH at 127.0.0.1)"
    assert run.startswith(f"run {job}: running · ") and " running" in run.removeprefix(f"run {job}: running · ")

    finished = asked["status finished"]
    assert finished.returncode == 0, finished.stderr
    (evaluated,) = eval_facts(_summary(pulumi_up.first[pulumi_up.phase("eval")]))
    assert finished.stdout.splitlines()[-1] == (
        f"run {job}: succeeded · finished: every step up to eval done (step 20, loss {export['final_loss']:.4f}, "
        f"model kept in {export['kept_dir']}) · eval: {evaluated}"
    )
    logs = asked["logs finished"].stdout.splitlines()
    assert [line for line in logs if line.startswith("✓ ") and " done in " in line][-1].startswith("✓ eval done")
    last = json.loads(logs[-1].removeprefix("summary: "))
    assert logs[-1].startswith("summary: ") and last == _summary(pulumi_up.first[pulumi_up.phase("eval")])

    gone = asked["status gone"]
    said = gone.stdout.splitlines()
    assert gone.returncode == EXIT_UNREACHABLE and said[0].startswith("VM: 127.0.0.1 does not answer SSH (")
    assert "VM tpu-sft-rehearsal: its state is unknown (" in said[0]  # no gcloud here to ask Compute Engine
    # The one-host rehearsal keeps its checkpoints on the host: no copy of the log elsewhere (a lost VM's log from
    # the bucket: tests/remote/stack/test_run_log_bucket.py).
    assert said[1:] == ["run: unknown (the run keeps no copy of its log off the VM (no checkpoint bucket))"]
    assert all(TOKEN not in a.stdout + a.stderr for a in asked.values())


def test_the_kept_model_is_fetched_from_the_data_disk_through_the_host(pulumi_up):
    export = _summary(pulumi_up.first[pulumi_up.phase("export")])
    fetched, into = pulumi_up.asked["fetch-model"], pulumi_up.directory / "fetched"
    assert fetched.returncode == 0, fetched.stderr
    assert fetched.stdout.startswith(f"the model from 127.0.0.1:{export['kept_dir']} is in {into}: ")
    assert (into / "manifest.json").read_bytes() == Path(export["manifest"]).read_bytes()
    entries = json.loads((into / "manifest.json").read_text())["files"]
    assert "hf-model/model.safetensors" in {e["path"] for e in entries}
    assert manifest_mismatches(str(into), entries) == []


def test_second_up_redoes_nothing(pulumi_up):
    jobs_after_first = pulumi_up.job_dirs()
    bootstrap = pulumi_up.second[pulumi_up.phase("bootstrap")]
    assert "already installed" in bootstrap.stdout
    for phase in ("convert", "train", "export", "eval"):
        again = pulumi_up.second[pulumi_up.phase(phase)]
        assert again.returncode == 0
        assert f"{phase}: job {pulumi_up.run_job} on 127.0.0.1 (succeeded)" in again.stdout
        assert _summary(again) == _summary(pulumi_up.first[pulumi_up.phase(phase)])
        assert again.seconds < 30
    assert pulumi_up.job_dirs() == jobs_after_first  # no new job was started


def test_a_new_vm_with_the_kept_model_converts_and_trains_nothing(pulumi_up):
    first_export = _summary(pulumi_up.first[pulumi_up.phase("export")])
    reason = f"the model kept in {first_export['kept_dir']} has these inputs and matches its manifest"
    # The run task started the run, which found the kept model at once; convert's task, the first to follow it,
    # shows its part, and train's and export's found it finished.
    assert f"· convert skipped: {reason}" in pulumi_up.new_vm[pulumi_up.phase("convert")].stdout
    log = pulumi_up.new_vm_host.state_dir / "jobs" / "run-1" / "log"
    skipped = [e for e in map(json.loads, log.read_text().splitlines()) if e.get("status") == "skipped"]
    assert [e["phase"] for e in skipped] == ["assets", *RUN_STEPS[:-1]] and {e["reason"] for e in skipped} == {reason}
    # The eval is not the kept model's: it runs, and finds its report kept beside the model with the same inputs.
    evaluated = _summary(pulumi_up.new_vm[pulumi_up.phase("eval")])
    assert evaluated["eval"]["kept"] is True and "reused_kept_model" not in evaluated
    assert evaluated["eval"]["tasks"] == _summary(pulumi_up.first[pulumi_up.phase("eval")])["eval"]["tasks"]
    for phase in ("convert", "train", "export"):
        run = pulumi_up.new_vm[pulumi_up.phase(phase)]
        assert run.returncode == 0, run.stdout + run.stderr[-2000:]
        assert f"{phase}: job run-1 on 127.0.0.1 (" in run.stdout
        summary = _summary(run)
        assert summary["reused_kept_model"] is True and summary["logs"] == []
        for fact in ("final_step", "final_loss"):  # train's facts, which the convert job does not report
            assert summary.get(fact) == (None if phase == "convert" else first_export[fact]), fact
    assert not (pulumi_up.new_vm_host.directory / "scratch" / "logs").exists()  # no MaxText process ran there
    assert sorted(p.name for p in log.parent.parent.iterdir()) == ["run-1"]  # one run, followed by every phase


def test_token_reaches_the_host_only_as_a_0600_file(pulumi_up):
    secret = pulumi_up.host.state_dir / "secrets" / "hf_token"
    assert secret.read_text() == TOKEN
    assert stat.S_IMODE(secret.stat().st_mode) == 0o600


def test_token_appears_nowhere_else(pulumi_up):
    outputs = [pulumi_up.closed_output] + [
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
