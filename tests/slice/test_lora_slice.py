"""A LoRA run on the multi-host rehearsal (rehearsal/slice.py with rehearsal/cli.py `LORA`: tpu-sft:tuning lora on
Tunix's loop): both hosts train ONE adapter as one JAX job, and once its first checkpoint (the adapter and its
optimizer alone) is in the bucket Google restarts the slice: each host's start-up resumes the run from that checkpoint,
the frozen weights read again from the converted base, and worker 0 exports the adapter and its merge into the base,
checks both against MaxText's logits with the adapter applied, and keeps both in the bucket.

The full fine-tuning run on the same machinery, and all a slice does besides training: test_slice_rehearsal.py."""

from __future__ import annotations

import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from rehearsal import slice as slice_rehearsal
from rehearsal.cli import LORA
from tests.slice.test_slice_rehearsal import REJOIN_WAIT_S, checkpoints_prefix
from tests.ssh_testbed import wait_until
from workload.measure.logit_parity import KL_BOUND
from workload.run import kept
from workload.run.progress import parse_event

STEPS, CHECKPOINT_PERIOD = 8, 4


@dataclass
class LoraSlice:
    rehearsal: slice_rehearsal.SliceRehearsal
    checkpoint_at_restart: int | None = None  # the bucket's last checkpoint once Google's restart killed run-1
    restart_lines: dict[int, str] = field(default_factory=dict)  # worker → its start-up's boot-resume line
    exits: dict[int, str] = field(default_factory=dict)  # worker → run-2's exit code
    events: dict[int, list[dict]] = field(default_factory=dict)  # worker → run-2's progress events
    local_train_steps: dict[int, list[str]] = field(default_factory=dict)  # worker → train steps in ~/jax_cache
    objects: dict[str, int] = field(default_factory=dict)  # the bucket's, at the end
    storage_refusals: list[str] = field(default_factory=list)

    def summary(self, until: str) -> dict:
        """What worker 0's run-2 printed for its part up to `until`."""
        return next(e for e in self.events[0] if e["event"] == "summary" and e["until"] == until)

    def losses(self, worker: int) -> dict[int, float]:
        return {e["step"]: e["loss"] for e in self.events[worker] if e["event"] == "step"}


def _job(rehearsal: slice_rehearsal.SliceRehearsal, worker: int, job: str) -> Path:
    return rehearsal.hosts.by_worker_id(worker).home / ".tpu-sft" / "jobs" / job


@pytest.fixture(scope="module")
def lora_slice(tmp_path_factory) -> LoraSlice:
    started = time.monotonic()
    with ExitStack() as stack:
        # Without held-out passes, as the full run's slice rehearsal (tests/fresh_vm/conftest.py says why).
        rehearsal = slice_rehearsal.start(
            tmp_path_factory.mktemp("lora-slice"),
            stack,
            steps=STEPS,
            checkpoint_period=CHECKPOINT_PERIOD,
            held_out=False,
            settings=LORA,
        )
        result = LoraSlice(rehearsal)
        for phase in ("bootstrap", "run"):  # the run task starts run-1 on every worker; nobody follows it
            done = rehearsal.run(phase)
            assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        checkpoints = checkpoints_prefix(rehearsal)
        wait_until(lambda: rehearsal.emulator.latest_checkpoint(checkpoints) is not None, 1800, "run-1's checkpoint")
        result.restart_lines = rehearsal.google_restart(REJOIN_WAIT_S)
        result.checkpoint_at_restart = rehearsal.emulator.latest_checkpoint(checkpoints)  # the old boots' last
        for worker in (0, 1):
            exit_file = _job(rehearsal, worker, "run-2") / "exit"
            wait_until(exit_file.exists, 3600, f"run-2 to end on worker {worker}")
            result.exits[worker] = exit_file.read_text().strip()
            lines = (_job(rehearsal, worker, "run-2") / "log").read_text().splitlines()
            result.events[worker] = [e for e in map(parse_event, lines) if e is not None]
        result.local_train_steps = {
            h.worker_id: sorted(p.name for p in (h.home / "jax_cache").glob("*train_step-*"))
            for h in rehearsal.hosts.hosts
        }
        result.objects = rehearsal.emulator.objects()
        result.storage_refusals = list(rehearsal.storage.refusals)
    print(f"\nLoRA slice rehearsal on 2 hosts: {time.monotonic() - started:.0f} s", flush=True)
    return result


def test_both_workers_train_one_adapter_as_one_jax_job(lora_slice):
    assert lora_slice.exits == {0: "0", 1: "0"}, lora_slice.events
    train = lora_slice.summary("train")
    assert train["ok"] and train["final_step"] == STEPS
    assert train["devices"] == 2  # one JAX job over both hosts' CPU devices, not two jobs of one device each
    # Each worker's trainer logs the one job's loss: the same at every step.
    assert lora_slice.losses(0) and lora_slice.losses(0) == lora_slice.losses(1)


def test_googles_restart_mid_train_resumes_the_lora_run_from_its_checkpoint(lora_slice):
    """Both hosts' start-ups begin run-2, which goes on from run-1's last checkpoint (the adapter and its optimizer),
    not from step 0, on both workers."""
    at_restart = lora_slice.checkpoint_at_restart
    assert at_restart is not None and at_restart < STEPS
    assert all(line.endswith(": started run-2") for line in lora_slice.restart_lines.values()), lora_slice.restart_lines
    for worker in (0, 1):
        (resume,) = [e for e in lora_slice.events[worker] if e["event"] == "resume"]
        assert resume["from_step"] == at_restart
        assert min(lora_slice.losses(worker)) == at_restart + 1


def test_worker_0_exports_the_adapter_and_the_merged_model_and_both_match_maxtexts_logits(lora_slice):
    keep = lora_slice.summary("keep")
    verify = keep["verify"]
    assert keep["ok"] and verify["ok"], verify
    assert verify["logits_kl_max"] <= KL_BOUND["tiny"] and verify["adapter_logits_kl_max"] <= KL_BOUND["tiny"]
    run_dir = f"kept/{keep['run_name']}"
    assert {
        f"{run_dir}/manifest.json",
        f"{run_dir}/hf-model/model.safetensors",
        f"{run_dir}/{kept.ADAPTER}/adapter_config.json",
        f"{run_dir}/{kept.ADAPTER}/adapter_model.safetensors",
    } <= set(lora_slice.objects)


def test_no_worker_loads_a_train_step_another_compiled(lora_slice):
    """The LoRA step is compiled by every worker, as the full one is (workload/run/commands.py says why)."""
    assert not any("train_step-" in name for name in lora_slice.objects if "/jax-cache/" in name)
    assert lora_slice.local_train_steps == {0: [], 1: []}
    assert lora_slice.storage_refusals == []
