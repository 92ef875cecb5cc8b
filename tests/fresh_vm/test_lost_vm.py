"""A VM lost mid-training (a Spot preemption: its root filesystem and /dev/shm gone, the data disk and the bucket
kept): its group makes it again, which resumes from the last checkpoint in the bucket, and one loss curve spans both
VMs. The bucket is gcp-storage-emulator, a real Cloud Storage API server on this machine, behind the IAM stand-in: the
VMs reach it as their service account, with the roles the program declared. How the recreated VM resumed with nobody
at the laptop: tests/fresh_vm/test_group_recreates.py."""

from __future__ import annotations

from rehearsal.fresh_vm import evidence
from rehearsal.fresh_vm.rehearse import CHECKPOINT_PERIOD
from workload.core.config import PipelineConfig
from workload.core.trainer_loop import TRAINER_LOOPS
from workload.run.eval_step import EVAL_DIR

STEPS = 20  # the rehearsal stack's tpu-sft:steps
# The rehearsal stack's tpu-sft:trainer, the default: it names checkpoints its own way, the runner counts updates.
LOOP = TRAINER_LOOPS[PipelineConfig.trainer]


def test_the_vm_was_lost_after_a_checkpoint_and_before_the_end(fresh_vm):
    run = fresh_vm.run
    assert run.lost_at_checkpoint is not None and CHECKPOINT_PERIOD <= run.lost_at_checkpoint < STEPS
    lost_train = run.first_up[-1]
    assert lost_train.name.endswith("-train") and lost_train.returncode != 0
    # The preempted VM, the one its group made, that one's two Google restarts (tests/fresh_vm/test_restart_resumes.py),
    # the VM the group made after the second preemption.
    assert [b.number for b in run.boots] == [1, 2, 3, 4, 5]


def test_the_next_vm_resumes_from_the_last_checkpoint_in_the_bucket(fresh_vm):
    run = fresh_vm.run
    lost_at = run.lost_at_checkpoint
    resumed = run.recreations[0].boot.first("resume")
    assert resumed is not None and resumed["checkpoints"].startswith("gs://")
    assert resumed.get("checkpoint", resumed["from_step"]) == lost_at and resumed["from_step"] == LOOP.updates(lost_at)
    assert "restarts from the first example" in resumed.get("data", "")  # MaxText checkpoints no data iterator
    assert evidence.first_resumed_step(run) == LOOP.updates(lost_at) + 1
    assert run.summary["ok"] and run.summary["final_step"] == STEPS


def test_one_loss_curve_spans_both_vms_and_the_restart(fresh_vm):
    run = fresh_vm.run
    steps = {r["step"] for r in run.kept_train_steps}
    # A VM lost (or restarted) right after checkpoint N may take the lines of the updates since the last line it
    # wrote (workload/run/train_metrics.py): N's; MaxText's own loop logs a step one step late, so also the one before.
    gaps = set()
    for checkpoint in (run.lost_at_checkpoint, run.restarts[0].at_checkpoint):
        at = LOOP.updates(checkpoint)
        gaps |= set(range(at - LOOP.updates_after, at + 1))
    assert set(range(1, STEPS + 1)) - steps <= gaps
    assert max(steps) == STEPS
    attempts = {r["attempt"] for r in run.kept_train_steps}
    assert len(attempts) == 3  # the lost VM's and the restarted boot's records came back from the bucket


def test_the_next_vm_loads_the_training_step_from_the_compile_cache_in_the_bucket(fresh_vm):
    # MaxText's own loop jits `train_step` (Tunix's loop `_train_step`: jit__train_step-…)
    assert any("jax-cache/jit_train_step-" in n for n in fresh_vm.run.bucket_objects)
    lost, *resumed = evidence.first_step_seconds(fresh_vm.run).values()
    assert len(resumed) == 2 and max(resumed) < lost  # ratio in the rehearsal's report (bench/RESULTS.md)


def test_the_checkpoints_are_in_the_bucket_not_on_the_vm(fresh_vm):
    names = fresh_vm.run.bucket_objects
    for step in (fresh_vm.run.lost_at_checkpoint, LOOP.checkpoint_step(STEPS)):
        assert any(n.endswith(f"/checkpoints/{step}/commit_success.txt") for n in names), step
    assert any("/train-metrics/train_steps.jsonl" in n for n in names)


def test_keep_copies_the_model_from_the_data_disk_to_the_bucket_which_outlives_the_vm(fresh_vm):
    """What `tpu-sft fetch-model` reads once autostop has deleted the VM (tests/remote/stack/test_fetch_model_no_vm.py):
    gs://<bucket>/kept/<run>/, every file the kept manifest lists, at its size, and the manifest itself."""
    run = fresh_vm.run
    name = run.summary["kept_dir"].rsplit("/", 1)[1]
    assert run.summary["kept_copy"].endswith(f"/kept/{name}")
    copied = {n.removeprefix(f"kept/{name}/"): size for n, size in run.bucket_objects.items() if n.startswith("kept/")}
    listed = {entry["path"]: entry["size"] for entry in run.kept_manifest["files"]}
    assert listed and "manifest.json" in copied
    # The eval step copies its own files after keep's (eval/, its report written last): outside the kept manifest.
    evaluated = {path for path in copied if path.startswith(f"{EVAL_DIR}/")}
    assert f"{EVAL_DIR}/report.json" in evaluated
    assert {path: size for path, size in copied.items() if path not in evaluated | {"manifest.json"}} == listed


def test_the_vms_reached_the_bucket_as_their_service_account_and_were_refused_nothing(fresh_vm):
    """Cloud Storage here enforces the roles the program declared for the VM's account (rehearsal/storage_iam.py):
    the resume above passed on the declared grant, with not one 403 on the way."""
    (storage,) = [s for s in fresh_vm.run.substitutions if s.name == "cloud-storage"]
    assert "IAM stand-in" in storage.here and "123456789012-compute@developer.gserviceaccount.com" in storage.here
    assert fresh_vm.run.storage_refusals == []
