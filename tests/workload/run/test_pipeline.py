"""The runner's bookkeeping, with stand-in steps: idempotency, partial re-runs, failures, --until, and the
token's path into a child process. (tests/workload/test_tiny_pipeline.py runs real MaxText.)"""

import fcntl
import io
import json
import os
import sys

import pytest

from workload.core.config import PipelineConfig
from workload.core.contract import PHASE_UNTIL
from workload.launch.hf_token import REDACTED, TokenError, read_token, redactor
from workload.launch.proc import StepFailed
from workload.run import commands, kept, mount, pipeline
from workload.run.events import Events
from workload.run.fingerprint import manifest
from workload.run.layout import Layout
from workload.run.phase_outcome import KEPT_PHASES, outcome_lines
from workload.run.steps import Context, Outcome, training_wall_seconds

TOKEN = "hf_SECRETsecretSECRET123"


def make_context(tmp_path, config, token=None):
    out = io.StringIO()
    layout = Layout(str(tmp_path / "work"), str(tmp_path / "out"), config.model, config.run_name or "run")
    ctx = Context(
        config=config,
        layout=layout,
        events=Events(out),
        python=sys.executable,
        hostname="vm",
        base_env=dict(os.environ),
        scrub=redactor(token),
        token=token,
        package_root=os.getcwd(),
    )
    return ctx, out


@pytest.fixture
def fake_steps(monkeypatch):
    """Every step writes one file named for its call number, so a re-run and its outputs are visible."""
    calls = []

    def fake(name):
        def step(ctx):
            calls.append(name)
            path = os.path.join(ctx.layout.work_dir, "fake", name)
            os.makedirs(path, exist_ok=True)
            with open(os.path.join(path, "out"), "w") as f:
                f.write(str(len(calls)))
            return Outcome(path, {f"{name}_facts": len(calls)}, hashes=True)

        return step

    for name in pipeline.STEPS:
        monkeypatch.setitem(pipeline.STEPS, name, fake(name))
    return calls


def events_of(out):
    return [json.loads(line) for line in out.getvalue().splitlines()]


def test_second_run_with_the_same_inputs_runs_nothing(tmp_path, fake_steps):
    config = PipelineConfig()
    ctx, _ = make_context(tmp_path, config)
    assert pipeline.run(ctx) == 0
    assert fake_steps == ["convert", "train", "export", "verify", "keep"]
    ctx, out = make_context(tmp_path, config)
    assert pipeline.run(ctx) == 0
    assert fake_steps == ["convert", "train", "export", "verify", "keep"]
    events = events_of(out)
    assert [e["status"] for e in events[:-1]] == ["skipped"] * 5
    assert events[-1]["event"] == "summary" and events[-1]["ok"] and events[-1]["keep_facts"] == 5


def test_a_changed_training_input_reruns_train_and_what_follows_only(tmp_path, fake_steps):
    ctx, _ = make_context(tmp_path, PipelineConfig(run_name="r"))
    pipeline.run(ctx)
    ctx, out = make_context(tmp_path, PipelineConfig(run_name="r", learning_rate=1e-4))
    pipeline.run(ctx)
    assert fake_steps[5:] == ["train", "export", "verify", "keep"]
    assert [(e["phase"], e["status"]) for e in events_of(out)[:2]] == [("convert", "skipped"), ("train", "start")]


def test_a_changed_output_reruns_that_step(tmp_path, fake_steps):
    ctx, _ = make_context(tmp_path, PipelineConfig())
    pipeline.run(ctx)
    with open(tmp_path / "work" / "fake" / "export" / "out", "a") as f:
        f.write("tampered")
    ctx, out = make_context(tmp_path, PipelineConfig())
    pipeline.run(ctx)
    assert fake_steps[5:] == ["export", "verify", "keep"]
    assert "its outputs changed" in events_of(out)[2]["reason"]


def test_until_stops_after_that_step_and_the_next_phase_continues(tmp_path, fake_steps):
    ctx, out = make_context(tmp_path, PipelineConfig())
    pipeline.run(ctx, until="train")
    assert fake_steps == ["convert", "train"] and events_of(out)[-1]["until"] == "train"
    ctx, _ = make_context(tmp_path, PipelineConfig())
    pipeline.run(ctx, until="keep")
    assert fake_steps == ["convert", "train", "export", "verify", "keep"]


def test_the_run_prints_each_phases_summary_as_its_part_ends(tmp_path, fake_steps):
    """The one run on the VM: what each phase task prints, with what the steps up to its part's end found and the
    logs since the part before; the whole run's summary is last, as ever."""
    phase_ends = tuple(PHASE_UNTIL.values())
    ctx, out = make_context(tmp_path, PipelineConfig(profile="tiny"))
    ctx.log_paths.extend(["assets.log"])  # as if the assets step had logged one
    assert pipeline.run(ctx, "keep", phase_ends) == 0
    summaries = [e for e in events_of(out) if e["event"] == "summary"]
    assert [s["until"] for s in summaries] == ["convert", "train", "keep"]
    assert "train_facts" not in summaries[0] and summaries[0]["convert_facts"] == 2
    assert summaries[1]["train_facts"] == 3 and "export_facts" not in summaries[1]
    assert summaries[2]["keep_facts"] == 6 and summaries[2]["convert_facts"] == 2
    assert [s["logs"] for s in summaries] == [["assets.log"], [], []]
    assert events_of(out)[-1] == summaries[-1]

    ctx, out = make_context(tmp_path, PipelineConfig(profile="tiny"))  # a later attempt: every step done
    assert pipeline.run(ctx, "keep", phase_ends) == 0
    again = [e for e in events_of(out) if e["event"] == "summary"]

    def facts(summary: dict) -> dict:
        return {k: v for k, v in summary.items() if k not in ("t", "logs")}

    assert [facts(s) for s in again] == [facts(s) for s in summaries]
    assert fake_steps == pipeline.plan("tiny", "keep")  # nothing ran again


def test_a_failed_step_ends_the_run_with_no_summary_for_the_parts_after_it(tmp_path, fake_steps, monkeypatch):
    def broken(ctx):
        raise StepFailed("RuntimeError: out of memory", None, [])

    monkeypatch.setitem(pipeline.STEPS, "train", broken)
    ctx, out = make_context(tmp_path, PipelineConfig())
    assert pipeline.run(ctx, "keep", tuple(PHASE_UNTIL.values())) == 1
    summaries = [e for e in events_of(out) if e["event"] == "summary"]
    assert [(s["until"], s["ok"]) for s in summaries] == [("convert", True), ("keep", False)]
    assert summaries[-1]["failed_step"] == "train"


def test_tiny_profile_builds_its_assets_first(tmp_path, fake_steps):
    ctx, _ = make_context(tmp_path, PipelineConfig(profile="tiny"))
    pipeline.run(ctx, until="convert")
    assert fake_steps == ["assets", "convert"]


def test_a_failed_step_is_not_marked_done_and_earlier_outputs_stay(tmp_path, fake_steps, monkeypatch):
    def broken(ctx):
        raise StepFailed("ValueError: checkpoint is corrupt", "/logs/export.log", ["line 1", "ValueError: …"])

    monkeypatch.setitem(pipeline.STEPS, "export", broken)
    ctx, out = make_context(tmp_path, PipelineConfig())
    assert pipeline.run(ctx) == 1
    events = events_of(out)
    failed = [e for e in events if e.get("status") == "failed"]
    assert failed == [dict(failed[0], phase="export", cause="ValueError: checkpoint is corrupt")]
    error = next(e for e in events if e["event"] == "error")
    assert error["log"] == "/logs/export.log" and error["tail"][-1] == "ValueError: …"
    assert events[-1] == dict(
        events[-1], event="summary", ok=False, failed_step="export", error="ValueError: checkpoint is corrupt"
    )
    assert not os.path.exists(ctx.layout.marker("export"))
    assert os.path.exists(ctx.layout.marker("train")) and os.path.exists(tmp_path / "work" / "fake" / "train")
    assert fake_steps == ["convert", "train"]


def test_an_unexpected_runner_error_still_ends_with_one_line_and_the_summary(tmp_path, fake_steps, monkeypatch):
    def buggy(ctx):
        raise OSError(28, "No space left on device")

    monkeypatch.setitem(pipeline.STEPS, "convert", buggy)
    ctx, out = make_context(tmp_path, PipelineConfig())
    assert pipeline.run(ctx) == 1
    assert events_of(out)[-1]["error"] == "OSError: [Errno 28] No space left on device"


def test_what_a_child_prints_of_the_token_never_reaches_the_log(tmp_path):
    ctx, _ = make_context(tmp_path, PipelineConfig(), token=TOKEN)
    script = f"import sys; print('token is', {TOKEN!r}); sys.exit(3)"
    with pytest.raises(StepFailed) as failure:
        ctx.run("probe", [sys.executable, "-c", script])
    (log,) = ctx.log_paths
    text = open(log).read()
    assert f"token is {REDACTED}" in text and TOKEN not in text
    assert failure.value.cause == "exited with code 3 without an error message"
    assert TOKEN not in json.dumps(failure.value.tail)


def test_token_file_must_be_private_and_errors_never_show_it(tmp_path):
    path = tmp_path / "token"
    path.write_text(TOKEN + "\n")
    os.chmod(path, 0o644)
    with pytest.raises(TokenError) as error:
        read_token(str(path), {})
    assert "chmod 600" in str(error.value) and TOKEN not in str(error.value)
    os.chmod(path, 0o600)
    assert read_token(str(path), {"HF_TOKEN": "other"}) == TOKEN
    assert read_token(None, {"HF_TOKEN": "from-env"}) == "from-env"
    assert read_token(None, {}) is None
    with pytest.raises(TokenError, match="No such file"):
        read_token(str(tmp_path / "absent"), {})


def test_a_second_runner_on_the_same_work_dir_is_refused(tmp_path, fake_steps):
    os.makedirs(tmp_path / "work")
    with open(tmp_path / "work" / ".lock", "w") as holder:
        fcntl.flock(holder, fcntl.LOCK_EX)
        ctx, out = make_context(tmp_path, PipelineConfig())
        assert pipeline.run(ctx) == 2
    assert fake_steps == []
    summary = events_of(out)[-1]
    assert summary["failed_step"] == "setup" and "another runner is using" in summary["error"]
    ctx, _ = make_context(tmp_path, PipelineConfig())
    assert pipeline.run(ctx) == 0  # released with its holder


def test_training_wall_time_counts_a_killed_attempt_up_to_its_last_logged_step():
    attempts = [{"attempt": 100.0}, {"attempt": 500.0}, {"attempt": 500.0, "seconds": 60.0}]
    metrics = [
        {"step": 1, "attempt": 100.0, "t": 130.0},
        {"step": 9, "attempt": 100.0, "t": 190.0},
        {"step": 10, "attempt": 500.0, "t": 550.0},
    ]
    assert training_wall_seconds(attempts, metrics) == 90.0 + 60.0


KEPT_AT = "2026-12-06T16:57:03Z"


def keep_model_as_the_keep_step_would(ctx, facts):
    """A kept run dir with a manifest carrying each step's inputs (workload/run/steps.py keep)."""
    os.makedirs(os.path.join(ctx.layout.kept_dir, "hf-model"))
    with open(os.path.join(ctx.layout.kept_dir, "hf-model", "model.safetensors"), "wb") as f:
        f.write(b"weights")
    files = manifest(ctx.layout.kept_dir, hashes=True)
    with open(os.path.join(ctx.layout.kept_dir, kept.MANIFEST), "w") as f:
        steps = {
            step: {"inputs": inputs, "facts": facts if step == "train" else {}}
            for step, inputs in pipeline.step_fingerprints(ctx).items()
        }
        json.dump({"run_name": ctx.layout.run_name, "steps": steps, "files": files, "kept_at": KEPT_AT}, f)


def phase_job(tmp_path, config, phase):
    """A job as the Pulumi program starts it for `phase`: only that phase's settings, the run name they give,
    a new host's empty scratch, the data disk shared with the host that kept the model."""
    given = PipelineConfig.from_mapping(config.phase_settings(phase))
    ctx, out = make_context(tmp_path / f"new-{phase}", given)
    ctx.layout = Layout(ctx.layout.work_dir, str(tmp_path / "disk"), given.model, commands.run_name(given))
    return ctx, out


def keep_on_a_lost_vm(tmp_path, config, facts):
    lost_vm, _ = make_context(tmp_path / "lost", config)
    lost_vm.layout = Layout(lost_vm.layout.work_dir, str(tmp_path / "disk"), config.model, commands.run_name(config))
    keep_model_as_the_keep_step_would(lost_vm, facts)


def test_a_new_host_with_this_runs_kept_model_runs_no_step_in_any_phase(tmp_path, fake_steps):
    config = PipelineConfig(step_count=2000, learning_rate=1e-4)  # train settings the convert job is not given
    kept_run = commands.run_name(config)
    keep_on_a_lost_vm(tmp_path, config, {"final_step": 2000, "final_loss": 1.25, "run_name": kept_run})
    for phase in ("convert", "train", "export"):
        ctx, out = phase_job(tmp_path, config, phase)
        assert pipeline.run(ctx, PHASE_UNTIL[phase]) == 0
        assert fake_steps == [], phase
        events = events_of(out)
        assert [e["phase"] for e in events if e["event"] == "phase"] == pipeline.plan("full", PHASE_UNTIL[phase])
        assert all(
            e["status"] == "skipped" and "has these inputs and matches its manifest" in e["reason"]
            for e in events
            if e["event"] == "phase"
        )
        summary = events[-1]
        assert summary["reused_kept_model"] is True and summary["ok"] is True
        assert summary["run_name"] == kept_run  # a convert job's own name would come from train defaults
        if phase == "convert":  # what train reported is not convert's to report
            assert "final_step" not in summary
        else:
            assert (summary["final_step"], summary["final_loss"]) == (2000, 1.25)


def test_a_kept_model_from_other_train_inputs_is_converted_for_and_trained_again(tmp_path, fake_steps):
    keep_on_a_lost_vm(tmp_path, PipelineConfig(), {"final_step": 1000})
    other = PipelineConfig(step_count=2000)
    convert_job, _ = phase_job(tmp_path, other, "convert")
    assert pipeline.run(convert_job, "convert") == 0
    assert fake_steps == []  # convert's inputs are the kept model's: nothing to convert for it
    train_job, out = phase_job(tmp_path, other, "train")
    assert pipeline.run(train_job, "train") == 0
    assert fake_steps == ["convert", "train"]  # train's differ: it converts first, then trains
    assert "reused_kept_model" not in events_of(out)[-1]


def test_a_kept_model_from_other_convert_inputs_is_not_reused_by_convert(tmp_path, fake_steps):
    keep_on_a_lost_vm(tmp_path, PipelineConfig(), {"final_step": 1000})
    convert_job, out = phase_job(tmp_path, PipelineConfig(model="gemma3-12b"), "convert")
    assert pipeline.run(convert_job, "convert") == 0
    assert fake_steps == ["convert"]
    assert "reused_kept_model" not in events_of(out)[-1]


def test_the_run_on_a_new_host_with_this_runs_kept_model_prints_each_phases_summary(tmp_path, fake_steps):
    config = PipelineConfig(step_count=2000, learning_rate=1e-4)
    keep_on_a_lost_vm(tmp_path, config, {"final_step": 2000, "final_loss": 1.25, "run_name": commands.run_name(config)})
    run, out = phase_job(tmp_path, config, "export")  # the whole run's settings
    assert pipeline.run(run, "keep", tuple(PHASE_UNTIL.values())) == 0
    assert fake_steps == []
    summaries = [e for e in events_of(out) if e["event"] == "summary"]
    assert [s["until"] for s in summaries] == ["convert", "train", "keep"]
    assert all(s["reused_kept_model"] and s["ok"] for s in summaries)
    assert "final_step" not in summaries[0] and summaries[1]["final_step"] == summaries[2]["final_step"] == 2000
    # What `pulumi up` leaves on screen of the run's phases (the stack output `phases`): one line.
    assert outcome_lines(dict(zip(KEPT_PHASES, summaries, strict=True))) == {
        "run": f"run {commands.run_name(config)} finished before (model kept in {run.layout.kept_dir}, {KEPT_AT}): "
        "nothing to do"
    }


def test_eval_runs_after_keep_and_a_changed_eval_setting_reruns_eval_alone(tmp_path, fake_steps):
    ctx, _ = make_context(tmp_path, PipelineConfig())
    assert pipeline.run(ctx, "eval") == 0
    assert fake_steps == ["convert", "train", "export", "verify", "keep", "eval"]
    ctx, out = make_context(tmp_path, PipelineConfig.from_mapping({"evalLimit": 10}))
    assert pipeline.run(ctx, "eval") == 0
    assert fake_steps[6:] == ["eval"]  # nothing retrained, re-exported or re-kept
    started = [e for e in events_of(out) if e["event"] == "phase" and e["status"] == "start"]
    assert [(e["phase"], e["reason"]) for e in started] == [("eval", "its inputs changed")]


def test_the_run_on_a_new_host_with_this_runs_kept_model_runs_eval_on_it(tmp_path, fake_steps):
    """The steps up to keep are the kept model's; eval, which is not (a kept model records no eval inputs), runs on
    it, and its summary, last, carries the kept model's facts."""
    config = PipelineConfig(step_count=2000)
    keep_on_a_lost_vm(tmp_path, config, {"final_step": 2000, "run_name": commands.run_name(config)})
    run, out = phase_job(tmp_path, config, "eval")
    assert pipeline.run(run, "eval", tuple(PHASE_UNTIL.values())) == 0
    assert fake_steps == ["eval"]
    summaries = [e for e in events_of(out) if e["event"] == "summary"]
    assert [s["until"] for s in summaries] == ["convert", "train", "keep", "eval"]
    assert [bool(s.get("reused_kept_model")) for s in summaries] == [True, True, True, False]
    assert summaries[-1]["final_step"] == 2000 and summaries[-1]["eval_facts"] == 1
    assert summaries[-1]["run_name"] == commands.run_name(config)


def test_a_changed_setting_that_names_a_new_run_trains_it_and_leaves_the_kept_model(tmp_path, fake_steps):
    """The whole run (the run task's job) on a new host whose data disk keeps another run's model: a setting that
    names the run (here the steps) makes a new run, which does every step and keeps beside the old model."""
    old = PipelineConfig(step_count=1000)
    keep_on_a_lost_vm(tmp_path, old, {"final_step": 1000, "run_name": commands.run_name(old)})
    old_dir = tmp_path / "disk" / commands.run_name(old)
    before = manifest(str(old_dir), hashes=True)
    new = PipelineConfig(step_count=2000)
    assert commands.run_name(new) != commands.run_name(old)
    run, out = phase_job(tmp_path, new, "export")
    assert pipeline.run(run, "keep", tuple(PHASE_UNTIL.values())) == 0
    assert fake_steps == ["convert", "train", "export", "verify", "keep"]
    summaries = [e for e in events_of(out) if e["event"] == "summary"]
    assert not any(s.get("reused_kept_model") for s in summaries)
    assert set(outcome_lines(dict(zip(KEPT_PHASES, summaries, strict=True))) or {}) == set(KEPT_PHASES)
    assert manifest(str(old_dir), hashes=True) == before


def test_keep_waits_for_the_data_disk_and_fails_in_one_line_without_it(tmp_path, fake_steps, monkeypatch):
    monkeypatch.setattr(mount, "MOUNT_WAIT_S", 0)
    ctx, out = make_context(tmp_path, PipelineConfig())
    ctx.required_mount = str(tmp_path / "not-mounted")
    assert pipeline.run(ctx) == 1
    summary = events_of(out)[-1]
    assert summary["failed_step"] == "keep" and summary["error"].startswith(f"nothing is mounted at {tmp_path}")
    ctx, out = make_context(tmp_path, PipelineConfig())
    ctx.required_mount = "/"  # a mount point
    assert pipeline.run(ctx) == 0 and fake_steps[-1] == "keep"
