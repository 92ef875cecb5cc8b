"""The whole pipeline on real MaxText 0.2.3 (CPU, tiny Gemma 3), run once per session by the
`tiny_pipeline` fixture: interrupted during training, resumed, finished; then inspected here."""

import hashlib
import json
import math
import os
import re
import shutil
import subprocess

from bench.checkpoint_cost import FLOAT32_BYTES, FLOAT32_COPIES, parameter_count
from tests.workload.tiny_run import (
    REPO,
    TINY_SETTINGS,
    first_logged_step,
    latest_checkpoint,
    optimizer_step_counts,
    run_workload,
)
from workload.core.config import PipelineConfig
from workload.measure.samples import VERIFY_PROMPTS
from workload.run import commands, log_mirror
from workload.run.eval_step import EVAL_DIR
from workload.run.layout import Layout
from workload.tiny import assets as tiny

STEPS = TINY_SETTINGS["steps"]
ALL_PHASES = ["assets", "convert", "train", "export", "verify", "keep"]


def weights_diff(python, a_dir, b_dir):
    done = subprocess.run(
        [python, str(REPO / "tests" / "workload" / "weights_diff.py"), str(a_dir), str(b_dir)],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1])


def test_pipeline_reaches_the_requested_step_with_a_finite_falling_loss(tiny_pipeline):
    run = tiny_pipeline.finished
    summary = run.summary
    assert summary["ok"] and summary["error"] is None
    assert summary["final_step"] == STEPS
    assert summary["trained_checkpoint"].endswith(f"/checkpoints/{STEPS}/model_params")
    random_guess = math.log(tiny.SPEC["vocab_size"])  # a random model's loss: ln(vocabulary)
    assert math.isfinite(summary["final_loss"]) and summary["final_loss"] < random_guess
    assert summary["chips"] == 0 and summary["train_wall_s"] > 0


def test_a_trainer_killed_by_sigkill_ends_the_run_at_once_with_one_line_and_nothing_left_running(tiny_pipeline):
    kill = tiny_pipeline.trainer_kill
    assert kill.runner_ended_after_s is not None, f"the runner still ran 30 s after its trainer was killed: {kill}"
    assert kill.runner_ended_after_s < 30
    assert kill.left_behind == []  # the trainer's children (spawn worker, resource_tracker) included
    run = tiny_pipeline.interrupted
    assert run.returncode == 1
    assert run.summary["ok"] is False and run.summary["failed_step"] == "train"
    assert run.summary["error"] in (
        "killed by signal 9 (SIGKILL: the kernel's OOM killer sends this)",
        "killed by the kernel's OOM killer (signal 9, SIGKILL): the host ran out of memory",
    )


def test_an_interrupted_training_resumes_from_its_checkpoint_in_the_bucket_not_from_step_zero(tiny_pipeline):
    killed_at = tiny_pipeline.killed_at_checkpoint
    assert TINY_SETTINGS["checkpointPeriod"] <= killed_at < STEPS
    assert tiny_pipeline.interrupted.phases("done") == ["assets", "convert"]
    run = tiny_pipeline.finished
    assert run.phases("skipped") == ["assets", "convert"]
    (resume,) = [e for e in run.events if e["event"] == "resume"]
    assert resume["from_step"] == killed_at
    assert resume["checkpoints"].startswith(f"{tiny_pipeline.runs_url}/gemma3-4b/post-train/")
    assert "data iterator" in resume["data"]  # the replayed data is said, not hidden
    (train_log,) = [p for p in run.summary["logs"] if "/train-" in p]
    assert first_logged_step(train_log) == killed_at + 1
    # Chip time counts the killed attempt too, up to its last logged step: its records came back from the bucket.
    (train_done,) = [e for e in run.events if e["event"] == "phase" and e["phase"] == "train" and e["status"] == "done"]
    assert run.summary["train_wall_s"] > train_done["seconds"]


def test_checkpoints_and_tensorboard_are_in_the_bucket_not_on_scratch(tiny_pipeline):
    objects = tiny_pipeline.gcs.objects(tiny_pipeline.runs_prefix)
    run = f"{tiny_pipeline.runs_prefix}/gemma3-4b/post-train/{tiny_pipeline.finished.summary['run_name']}"
    for step in (tiny_pipeline.killed_at_checkpoint, STEPS):
        assert f"{run}/checkpoints/{step}/commit_success.txt" in objects
        assert any(n.startswith(f"{run}/checkpoints/{step}/model_params/") for n in objects)
    assert any(n.startswith(f"{run}/tensorboard/") and "events.out.tfevents" in n for n in objects)
    assert f"{run}/train-metrics/train_steps.jsonl" in objects
    # The run's log beside them (workload/run/log_mirror.py): what `scripts/tpu-sft logs` reads once the VM is gone.
    assert {f"{run}/run-log/summary.json", f"{run}/run-log/steps/train.json"} <= set(objects)
    assert any(n.startswith(f"{run}/run-log/") and n.endswith(".jsonl") for n in objects)
    assert not list(tiny_pipeline.work.glob("gemma3-4b/post-train"))


def test_progress_is_a_bounded_stream_of_steps_ending_with_the_last(tiny_pipeline):
    run = tiny_pipeline.finished
    steps = [e for e in run.events if e["event"] == "step"]
    assert steps and steps[-1]["step"] == STEPS and steps[-1]["steps"] == STEPS
    (train_done,) = [e for e in run.events if e["event"] == "phase" and e["phase"] == "train" and e["status"] == "done"]
    assert len(steps) <= train_done["seconds"] / 5 + 2  # at most one every 5 s, plus the first and the last
    assert all(math.isfinite(e["loss"]) for e in steps)


def test_export_carries_gelu_pytorch_tanh_and_records_why(tiny_pipeline):
    summary = tiny_pipeline.finished.summary
    config = json.loads((tiny_pipeline.work / "gemma3-4b" / "hf-trained" / "config.json").read_text())
    assert config["text_config"]["hidden_activation"] == "gelu_pytorch_tanh"
    (fix,) = summary["config_fixes"]
    assert (fix["was"], fix["now"]) == ("gelu", "gelu_pytorch_tanh") and "maxtext#2867" in fix["why"]


def test_transformers_loads_the_export_and_generates(tiny_pipeline):
    verify = tiny_pipeline.finished.summary["verify"]
    assert verify["ok"] and verify["problems"] == []
    assert verify["hidden_activation"] == "gelu_pytorch_tanh"
    assert len(verify["new_token_ids"]) == 8 and verify["generated_text"]


def test_sft_changed_the_weights(tiny_pipeline, maxtext_python):
    diff = weights_diff(
        maxtext_python, tiny_pipeline.work / "tiny" / "model", tiny_pipeline.work / "gemma3-4b" / "hf-trained"
    )
    assert diff["only_a"] == diff["only_b"] == []
    assert len(diff["different"]) > len(diff["identical"])


def test_round_trip_without_training_reproduces_the_original_weights(tiny_pipeline, maxtext_python, tmp_path):
    """Exports the converted, untrained checkpoint with the runner's own to_huggingface command."""
    config = PipelineConfig.from_mapping(TINY_SETTINGS)
    layout = Layout(str(tiny_pipeline.work), str(tiny_pipeline.out), config.model, commands.run_name(config))
    command = commands.to_huggingface(
        config,
        layout,
        commands.OnHost(python=maxtext_python),
        params=layout.converted_checkpoint,
        out_dir=str(tmp_path / "round-trip"),
    )
    env = {**os.environ, **command.env, "PYTHONPATH": str(REPO)}
    subprocess.run(command.argv, env=env, cwd=tmp_path, check=True, capture_output=True, timeout=600)
    diff = weights_diff(maxtext_python, tiny_pipeline.work / "tiny" / "model", tmp_path / "round-trip")
    assert diff["different"] == diff["only_a"] == diff["only_b"] == []
    assert len(diff["identical"]) > 50


def test_kept_files_match_their_manifest(tiny_pipeline):
    summary = tiny_pipeline.finished.summary
    kept = tiny_pipeline.out / summary["run_name"]
    assert summary["kept_dir"] == str(kept)
    files = json.loads((kept / "manifest.json").read_text())["files"]
    on_disk = sorted(str(p.relative_to(kept)) for p in kept.rglob("*") if p.is_file() and p.name != "manifest.json")
    # The eval step writes eval/ after keep, with its own report (workload/run/eval_step.py): outside the manifest.
    assert sorted(e["path"] for e in files) == [path for path in on_disk if not path.startswith(f"{EVAL_DIR}/")]
    for entry in files:
        data = (kept / entry["path"]).read_bytes()
        assert (len(data), hashlib.sha256(data).hexdigest()) == (entry["size"], entry["sha256"]), entry["path"]
    assert (kept / "loss.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert list(kept.glob("tensorboard/**/events.out.tfevents.*"))
    assert (kept / "hf-model" / "model.safetensors").is_file()
    steps = [json.loads(line)["step"] for line in (kept / "metrics" / "train_steps.jsonl").read_text().splitlines()]
    # A kill between saving checkpoint N and logging step N loses only that step's line.
    assert set(range(1, STEPS + 1)) - set(steps) <= {tiny_pipeline.killed_at_checkpoint} and max(steps) == STEPS


def checkpoint_data_bytes(objects: dict[str, int], run_prefix: str, step: int, item: str) -> int:
    """The bytes of a checkpoint item's array data: ocdbt's data files, without its metadata and manifests."""
    data = f"{run_prefix}/checkpoints/{step}/{item}/ocdbt.process_0/d/"
    return sum(size for name, size in objects.items() if name.startswith(data))


def test_a_checkpoint_holds_the_parameters_and_adams_two_moments_in_float32(tiny_pipeline):
    """bench/checkpoint_cost.py's size formula (parameters × 4 bytes × 3), checked on the tiny model's real
    checkpoint: the parameters under `model_params`, Adam's mu and nu under `optimizer_state` (the accumulator's
    zeros compress away). orbax compresses the stored arrays a little (a manual run here stored 0.925 and 0.920 of
    the computed sizes), so the formula is an upper bound."""
    run = f"{tiny_pipeline.runs_prefix}/gemma3-4b/post-train/{tiny_pipeline.finished.summary['run_name']}"
    objects = tiny_pipeline.gcs.objects(run)
    one_copy = parameter_count(tiny.SPEC) * FLOAT32_BYTES
    params = checkpoint_data_bytes(objects, run, STEPS, "model_params")
    optimizer = checkpoint_data_bytes(objects, run, STEPS, "optimizer_state")
    assert 0.85 * one_copy <= params <= one_copy, (params, one_copy)
    assert 0.85 * 2 * one_copy <= optimizer <= 2 * one_copy, (optimizer, one_copy)
    assert params + optimizer <= one_copy * FLOAT32_COPIES


def test_a_resume_continues_the_optimizer_and_its_schedule_where_the_checkpoint_left_them(
    tiny_pipeline, maxtext_python, tmp_path
):
    """Tunix 0.1.7 restores the optimizer state with the weights: in the last checkpoint of a run whose trainer was
    killed after checkpoint N and resumed, the optimizer's step, Adam's count and the learning-rate schedule's
    count are the run's steps, as an uninterrupted run's would be. Restarted state (Tunix 0.1.3) counts only the
    steps since the resume, and the schedule starts its warm-up again. The weights are not compared with an
    uninterrupted run's: the data restarts from the first example on a resume (docs/checkpoints.md)."""
    assert tiny_pipeline.killed_at_checkpoint < STEPS
    run = f"{tiny_pipeline.runs_prefix}/gemma3-4b/post-train/{tiny_pipeline.finished.summary['run_name']}"
    # Read from a copy (optimizer_step_counts says why); the trainer's own restore, with a target, reads the bucket.
    optimizer_state = f"{run}/checkpoints/{STEPS}/optimizer_state"
    counts = optimizer_step_counts(maxtext_python, tiny_pipeline.gcs, optimizer_state, tmp_path)
    assert len(counts) == 4 and set(counts.values()) == {STEPS}, counts  # step, gradient_step, Adam's, schedule's


def test_rerunning_the_finished_pipeline_does_no_maxtext_work(tiny_pipeline, maxtext_python):
    logs_before = sorted((tiny_pipeline.work / "logs").iterdir())
    run = run_workload(
        maxtext_python,
        tiny_pipeline.config,
        tiny_pipeline.work,
        tiny_pipeline.out,
        "--runs-dir",
        tiny_pipeline.runs_url,
    )
    assert run.returncode == 0
    assert run.phases("skipped") == ALL_PHASES and run.phases("start") == []
    assert sorted((tiny_pipeline.work / "logs").iterdir()) == logs_before  # no subprocess was started
    assert run.summary["logs"] == [] and run.seconds < 30
    assert run.summary["final_step"] == STEPS and run.summary["verify"]["ok"]


def checkpoint_objects(tiny_pipeline) -> dict[str, int]:
    """What the runs prefix holds but the copies of the runner's logs."""
    objects = tiny_pipeline.gcs.objects(tiny_pipeline.runs_prefix)
    return {name: size for name, size in objects.items() if f"/{log_mirror.LOG_DIR}/" not in name}


def test_a_new_vm_with_the_kept_model_verifies_it_and_trains_nothing(tiny_pipeline, maxtext_python, tmp_path):
    """A new host: empty scratch, the same data disk (out) and bucket. Nothing is converted or trained."""
    objects_before = checkpoint_objects(tiny_pipeline)
    fresh = tmp_path / "new-vm-scratch"
    run = run_workload(
        maxtext_python, tiny_pipeline.config, fresh, tiny_pipeline.out, "--runs-dir", tiny_pipeline.runs_url
    )
    assert run.returncode == 0 and run.phases("start") == []
    assert run.phases("skipped") == ALL_PHASES
    assert all("has these inputs and matches its manifest" in e["reason"] for e in run.events if e["event"] == "phase")
    assert run.summary["reused_kept_model"] is True
    finished = tiny_pipeline.finished.summary
    for fact in ("final_step", "final_loss", "verify", "kept_dir", "trained_checkpoint"):
        assert run.summary[fact] == finished[fact], fact
    assert not (fresh / "logs").exists()  # no MaxText subprocess at all
    assert checkpoint_objects(tiny_pipeline) == objects_before  # only its log's copy is new (log_mirror.py)


def test_a_corrupt_checkpoint_fails_export_with_one_line_and_keeps_earlier_outputs(
    tiny_pipeline, maxtext_python, tmp_path
):
    work = tmp_path / "work"
    shutil.copytree(tiny_pipeline.work, work, symlinks=True)
    (work / "markers" / "export.json").unlink()  # as if the export had never run
    runs = tmp_path / "runs"  # a copy of the bucket's run, so the shared one stays intact
    tiny_pipeline.gcs.download(tiny_pipeline.runs_prefix, runs)
    data = list(runs.glob(f"gemma3-4b/post-train/*/checkpoints/{STEPS}/model_params/ocdbt.process_0/d/*"))
    assert data
    for path in data:  # same sizes, garbage bytes: only reading the checkpoint can tell
        path.write_bytes(b"\0" * path.stat().st_size)
    run = run_workload(
        maxtext_python, tiny_pipeline.config, work, tmp_path / "out", "--until", "export", "--runs-dir", str(runs)
    )
    assert run.returncode == 1
    summary = run.summary
    assert summary["ok"] is False and summary["failed_step"] == "export"
    assert "\n" not in summary["error"] and re.match(r"^[\w.]*(Error|Exception)", summary["error"])
    error = next(e for e in run.events if e["event"] == "error")
    assert error["cause"] == summary["error"] and error["tail"] and error["log"].startswith(str(work / "logs"))
    assert run.phases("skipped") == ["assets", "convert", "train"]
    assert not (work / "markers" / "export.json").exists()
    assert (work / "markers" / "train.json").exists() and latest_checkpoint(runs) == STEPS
    assert (work / "gemma3-4b" / "mt-format" / "0" / "items").is_dir()


def test_the_held_out_loss_is_measured_before_training_and_at_every_interval_and_it_fell(tiny_pipeline):
    """MaxText's own evaluation on the tiny dataset's held-out split, at steps 0 and 30, and where the resumed
    attempt starts. The local records were deleted before the resume (a lost VM's): the curve still starts at step 0,
    restored from the bucket."""
    interval, resumed_at = TINY_SETTINGS["evalInterval"], tiny_pipeline.killed_at_checkpoint
    summary = tiny_pipeline.finished.summary
    expected = sorted({*range(0, STEPS + 1, interval), resumed_at})
    assert [step for step, _ in summary["eval_curve"]] == expected
    assert (summary["eval_loss_first_step"], summary["eval_loss_final_step"]) == (0, STEPS)
    assert summary["eval_loss_final"] < summary["eval_loss_first"] and summary["learned"] is True
    assert summary["eval_loss_first"] == summary["eval_curve"][0][1]
    first_attempt = [e for e in tiny_pipeline.interrupted.events if e["event"] == "eval"]
    assert first_attempt[0]["step"] == 0  # before the first update: the base model's
    resumed = [e for e in tiny_pipeline.finished.events if e["event"] == "eval"]
    assert resumed[0]["step"] == resumed_at and resumed[-1]["step"] == STEPS
    later_steps = [e for e in tiny_pipeline.finished.events if e["event"] == "step" and e["step"] > resumed[0]["step"]]
    assert later_steps and all(e["eval_step"] >= resumed[0]["step"] for e in later_steps)  # the progress line's
    time_split = summary["time_split_s"]
    assert 0 < time_split["eval"] < summary["train_wall_s"]


def test_samples_hold_both_models_answers_to_every_prompt(tiny_pipeline):
    summary = tiny_pipeline.finished.summary
    samples = summary["verify"]["samples"]
    prompts = samples["held_out_prompts"] + len(VERIFY_PROMPTS)
    assert samples["prompts"] == prompts and samples["held_out_prompts"] == 3
    assert len(samples["base_tokens"]) == len(samples["tuned_tokens"]) == len(samples["prompt_tokens"]) == prompts
    assert all(0 < n <= samples["max_new_tokens"] for n in samples["base_tokens"] + samples["tuned_tokens"])
    table = (tiny_pipeline.out / summary["run_name"] / "samples.md").read_text()
    rows = [line for line in table.splitlines() if line.startswith("| ") and not line.startswith("| prompt")]
    assert len(rows) == prompts
    held_out_questions = [c["messages"][0]["content"] for c in tiny.conversations(3, tiny.SPEC["conversations"])]
    assert [row.split(" | ")[0].removeprefix("| ") for row in rows[:3]] == held_out_questions
    for row in rows:
        cells = [cell.strip() for cell in row.strip("|").split(" | ")]
        assert len(cells) == 3 and all(cells), row  # the prompt, the base model's answer, the fine-tuned one
