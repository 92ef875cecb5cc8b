"""The multi-host rehearsal (rehearsal/slice.py): the program's tasks for a v6e-16 slice, run against two simulated
hosts (an sshd each in its own namespaces: hostname, home, /dev/shm; rehearsal/slice_hosts.py), real MaxText on
the tiny model training as ONE JAX job across them (one CPU process per host, gloo), its checkpoints in
gcp-storage-emulator behind the IAM stand-in (the hosts act as their service account, with the roles the program
declared). The hosts' metadata numbers them in a shuffled order (the host the target lists first is worker 1 by its
tpu-env): the workers, the JAX coordinator and the worker followed are the metadata's, and hosts whose tpu-env
repeats or lacks an id are refused in one line. The user closes the laptop right after convert starts (the convert
command's process group is SIGKILLed): the run goes on alone into train on both workers, and the commands run again
re-attach to it. One worker's trainer is then kill -9'd mid-run (what the kernel's OOM
killer does): every worker stops, the error names that worker, and the next `up` resumes from the bucket; export
and keep run once, on worker 0, into the bucket; a further `up` redoes nothing.

Stand-ins, where nothing real exists here: namespaces on this machine for the slice's VMs, the emulator for Cloud
Storage, CPUs for TPUs (the tiny profile runs on any number of workers; a real v6e-16 has four hosts)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from infra.tasks import last_json_line
from rehearsal import slice as slice_rehearsal
from rehearsal.metadata_standin import tpu_env
from rehearsal.run import Executed, start
from tests.procs import Watched, processes
from tests.remote.stack_commands import tpu_sft
from tests.workload.tiny_run import TRAINER
from workload.core.contract import TARGET_ENV
from workload.run.fingerprint import manifest_mismatches

STEPS, CHECKPOINT_PERIOD = 8, 4
PHASES = ("bootstrap", "convert", "train", "export")


@dataclass(frozen=True)
class Trainer:
    worker: int  # its JAX process index (MaxText's CPU path: JOB_COMPLETION_INDEX)
    coordinator: str  # the host it dials as JAX's coordinator


def trainers() -> dict[int, Trainer]:
    """pid → every live trainer on this machine, whichever host runs it."""
    found = {}
    for process in processes():
        if TRAINER not in process["cmdline"]:
            continue
        try:
            environ = Path(f"/proc/{process['pid']}/environ").read_bytes().decode().split("\0")
            env = dict(item.split("=", 1) for item in environ if "=" in item)
            found[process["pid"]] = Trainer(int(env["JOB_COMPLETION_INDEX"]), env["JAX_COORDINATOR_ADDRESS"])
        except (OSError, KeyError, ValueError):
            continue
    return found


@dataclass
class SliceUp:
    rehearsal: slice_rehearsal.SliceRehearsal
    addresses: tuple[str, ...]  # the hosts', in the target's order (they are gone once the fixture ends)
    worker_addresses: tuple[str, ...]  # the hosts', in worker order: their tpu-env's TPU_WORKER_ID
    first: dict[str, Executed] = field(default_factory=dict)  # bootstrap, convert, and the train a worker broke
    closed_output: str = ""  # what the convert command printed before the laptop closed
    jobs_unattended: dict[int, list[str]] = field(default_factory=dict)  # each worker's jobs then
    convert_printed_by_run: dict = field(default_factory=dict)  # the summary worker 0's run printed for convert
    killed: dict[int, int] = field(default_factory=dict)  # pid → worker id of the trainer killed
    trainers_at_kill: dict[int, Trainer] = field(default_factory=dict)  # every trainer, on either host
    checkpoint_at_kill: int | None = None
    checkpoint_at_end: int | None = None
    trainers_after_failure: dict[int, Trainer] = field(default_factory=dict)
    refused: dict[str, Executed] = field(default_factory=dict)  # train on hosts whose tpu-env has no whole order
    resumed: dict[str, Executed] = field(default_factory=dict)
    again: dict[str, Executed] = field(default_factory=dict)
    jobs_before_again: dict[int, list[str]] = field(default_factory=dict)
    jobs_after_again: dict[int, list[str]] = field(default_factory=dict)
    export_dirs: dict[int, bool] = field(default_factory=dict)  # worker → has an export in its own /dev/shm
    local_train_steps: dict[int, list[str]] = field(default_factory=dict)  # worker → train steps in ~/jax_cache
    objects: dict[str, int] = field(default_factory=dict)
    storage_refusals: list[str] = field(default_factory=list)  # every 403 Cloud Storage gave the hosts
    fetched: subprocess.CompletedProcess | None = None  # `scripts/tpu-sft fetch-model` from the bucket, at the end
    fetched_dir: Path | None = None
    seconds: float = 0.0

    def jobs(self) -> dict[int, list[str]]:
        return {
            h.worker_id: sorted(p.name for p in (h.home / ".tpu-sft" / "jobs").iterdir())
            for h in self.rehearsal.hosts.hosts
        }


def close_the_laptop_after_convert_starts(up: SliceUp) -> None:
    """Start the convert command in a process group of its own and SIGKILL the whole group once the run says convert
    started, as a laptop that sleeps takes its `pulumi up` with it; then, with nothing following, wait for the run
    to go on through convert into train (worker 0's log says train started)."""
    command = up.rehearsal.command("convert")
    watched = Watched(proc := start(command, up.rehearsal.environment(command), new_session=True))
    watched.read_until("▶ convert")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    up.closed_output = watched.stdout + watched.stderr
    assert proc.returncode == -signal.SIGKILL, up.closed_output
    log = up.rehearsal.hosts.by_worker_id(0).home / ".tpu-sft" / "jobs" / "run-1" / "log"
    train_started = '"phase": "train", "status": "start"'
    deadline = time.monotonic() + 1800
    while not (log.exists() and train_started in log.read_text()):
        assert time.monotonic() < deadline, "the run did not go on to train with the laptop closed"
        time.sleep(0.5)
    up.jobs_unattended = up.jobs()
    printed = (json.loads(line) for line in log.read_text().splitlines())
    up.convert_printed_by_run = next(e for e in printed if e["event"] == "summary" and e["until"] == "convert")


def follow_train_and_kill_worker_1(up: SliceUp) -> Executed:
    """The laptop is back: the train command re-attaches to the run, which trains, and worker 1's trainer is
    kill -9'd while it follows. Returns the train command's run."""
    command = up.rehearsal.command("train")
    watched = Watched(proc := start(command, up.rehearsal.environment(command)))
    watched.read_until("train: job ")  # every worker's job claimed: it is being followed from now on
    while up.rehearsal.emulator.latest_checkpoint(up.rehearsal.runs_prefix) is None:
        assert proc.poll() is None, "train ended before its first checkpoint reached the bucket"
        time.sleep(0.5)
    up.checkpoint_at_kill = up.rehearsal.emulator.latest_checkpoint(up.rehearsal.runs_prefix)
    up.trainers_at_kill = trainers()
    up.killed = {pid: trainer.worker for pid, trainer in up.trainers_at_kill.items() if trainer.worker == 1}
    assert up.killed, "no trainer of worker 1 is running"
    for pid in up.killed:
        os.kill(pid, signal.SIGKILL)
    watched.rest()
    returncode = proc.wait()
    return Executed(command.name, returncode, watched.stdout, watched.stderr, 0.0)


@pytest.fixture(scope="module")
def up(tmp_path_factory) -> SliceUp:
    started = time.monotonic()
    with ExitStack() as stack:
        # Without held-out passes, as the fresh-VM rehearsal (tests/fresh_vm/conftest.py says why).
        rehearsal = slice_rehearsal.start(
            tmp_path_factory.mktemp("slice"), stack, steps=STEPS, checkpoint_period=CHECKPOINT_PERIOD, held_out=False
        )
        hosts = rehearsal.hosts
        result = SliceUp(rehearsal, hosts.addresses, tuple(hosts.by_worker_id(w).address for w in range(hosts.count)))
        result.first["bootstrap"] = rehearsal.run("bootstrap")
        assert result.first["bootstrap"].returncode == 0, result.first["bootstrap"].stdout[-3000:]
        close_the_laptop_after_convert_starts(result)
        result.first["convert"] = rehearsal.run("convert")  # the laptop is back, the run training
        assert result.first["convert"].returncode == 0, result.first["convert"].stdout[-3000:]
        result.first["train"] = follow_train_and_kill_worker_1(result)
        result.trainers_after_failure = trainers()
        for phase in ("train", "export"):  # the next `pulumi up`: bootstrap and convert are done
            result.resumed[phase] = rehearsal.run(phase)
        result.checkpoint_at_end = rehearsal.emulator.latest_checkpoint(rehearsal.runs_prefix)
        result.jobs_before_again = result.jobs()
        result.again = {phase: rehearsal.run(phase) for phase in PHASES}
        result.jobs_after_again = result.jobs()
        first, second = hosts.hosts  # in the target's order: workers 1 and 0
        for case, text in (
            ("repeated", tpu_env(first.worker_id, 2)),
            ("missing", tpu_env(second.worker_id, 2).replace(f"TPU_WORKER_ID: '{second.worker_id}'\n", "")),
        ):
            second.metadata.set("tpu-env", text)
            result.refused[case] = rehearsal.run("train")
        second.metadata.set("tpu-env", tpu_env(second.worker_id, 2))
        assert result.jobs() == result.jobs_after_again  # nothing started on a slice without a whole order
        result.export_dirs = {
            h.worker_id: h.path("/dev/shm/tpu-sft/gemma3-4b/hf-trained/config.json").is_file()
            for h in rehearsal.hosts.hosts
        }
        result.local_train_steps = {
            h.worker_id: sorted(p.name for p in (h.home / "jax_cache").glob("jit__train_step-*"))
            for h in rehearsal.hosts.hosts
        }
        result.objects = rehearsal.emulator.objects()
        result.storage_refusals = list(rehearsal.storage.refusals)
        # The user fetches the kept model with their own access (the bucket's owner), the hosts' target the stack's.
        fetching = tmp_path_factory.mktemp("fetched")
        result.fetched_dir = fetching / "model"
        target = rehearsal.environment(rehearsal.command("export"))[TARGET_ENV]
        result.fetched = tpu_sft(
            fetching,
            {"target": target},
            "fetch-model",
            str(result.fetched_dir),
            env={"STORAGE_EMULATOR_HOST": rehearsal.emulator.url},
        )
    result.seconds = time.monotonic() - started
    print(f"\nslice rehearsal on 2 hosts: {result.seconds:.0f} s", flush=True)
    return result


def test_every_worker_ran_each_phase_as_its_own_jax_process(up):
    convert = last_json_line(up.first["convert"].stdout)
    assert convert["ok"] and convert["worker"] == 0  # worker 0 is followed
    jobs = up.jobs_before_again
    assert jobs[0] == jobs[1] == ["run-1", "run-2"]  # the run a worker broke, and the resumed one, on both
    train = last_json_line(up.resumed["train"].stdout)
    assert train["ok"] and train["final_step"] == STEPS
    assert train["devices"] == 2  # one JAX job over both hosts' CPU devices, not two jobs of one device each


def test_a_closed_laptop_leaves_the_run_going_on_every_worker(up):
    """Everything the rehearsal started was killed right after convert started, but the hosts: the run went on alone
    on both workers through convert into train, and the convert command run again re-attached to it and printed the
    summary the run printed for convert, starting nothing."""
    assert "convert: job run-1 on 2 workers: " in up.closed_output and "▶ convert" in up.closed_output
    assert up.jobs_unattended == {0: ["run-1"], 1: ["run-1"]}  # and the run was training, nothing following
    convert = up.first["convert"].stdout
    assert "convert: job run-1 on 2 workers: " in convert and convert.count("(running)") == 2
    assert last_json_line(convert) == up.convert_printed_by_run


def test_the_workers_follow_the_hosts_metadata_not_the_targets_order(up):
    """The target lists the hosts as the program does (by instance name); worker 0 is the host whose tpu-env says
    0, here the second: it is followed, it is JAX's coordinator for every trainer, and it alone exports."""
    assert up.worker_addresses == (up.addresses[1], up.addresses[0])  # shuffled: the first listed is worker 1
    coordinator = up.worker_addresses[0]
    convert = up.first["convert"].stdout
    assert f"on 2 workers: 0 {coordinator} (" in convert and f", 1 {up.addresses[0]} (" in convert
    assert sorted(t.worker for t in up.trainers_at_kill.values()) == [0, 1]
    assert {t.coordinator for t in up.trainers_at_kill.values()} == {coordinator}
    assert up.export_dirs == {0: True, 1: False}  # keyed by tpu-env worker id: the metadata's worker 0 exported


def test_hosts_whose_tpu_env_repeats_or_lacks_an_id_are_refused_in_one_line(up):
    first, second = up.addresses
    for case, said in (
        ("repeated", f"{first} and {second}: both have TPU_WORKER_ID 1 in their tpu-env. Fix: "),
        ("missing", f"{second}: its tpu-env has no TPU_WORKER_ID. Fix: "),
    ):
        refused = up.refused[case]
        summary = last_json_line(refused.stdout)
        assert refused.returncode != 0 and summary["ok"] is False
        assert summary["error"].startswith(said) and "\n" not in summary["error"], summary


def test_a_killed_worker_stops_every_worker_and_is_named(up):
    broken = up.first["train"]
    summary = last_json_line(broken.stdout)
    host = up.worker_addresses[1]
    assert broken.returncode != 0 and summary["ok"] is False
    assert (summary["worker"], summary["host"]) == (1, host)
    assert summary["error"].startswith(f"worker 1 ({host}): job run-1 ")
    assert "failed: exited with code 1 (killed by signal 9 (SIGKILL" in summary["error"]  # its own reason
    assert f"✗ worker 1 ({host})" in broken.stdout
    assert up.trainers_after_failure == {}  # worker 0's trainer did not outlive the failure


def test_the_next_up_resumes_from_the_bucket(up):
    train = up.resumed["train"]
    assert train.returncode == 0, train.stdout[-3000:]
    assert f"↻ train resumes from checkpoint {up.checkpoint_at_kill} in gs://" in train.stdout
    assert up.checkpoint_at_end == STEPS


def test_every_worker_shares_one_compile_cache_in_the_bucket(up):
    """JAX writes its compilation cache from process 0 only. In each host's ~/jax_cache (MaxText's default), a
    retry found worker 0's step compiled and worker 1's not: worker 0 reached the first collective minutes
    early, past gloo's 30 s rendezvous, and the resumed train aborted (CI, stop 22)."""
    assert any(name.startswith("runs/jax-cache/jit__train_step-") for name in up.objects)
    assert up.local_train_steps == {0: [], 1: []}


def test_the_hosts_declared_grant_covered_every_request_they_made(up):
    assert up.storage_refusals == []  # not one 403 from Cloud Storage, the resume included


def test_export_and_keep_ran_once_into_the_bucket(up):
    export = last_json_line(up.resumed["export"].stdout)
    assert export["ok"] and export["verify"]["ok"]
    assert export["kept_dir"].startswith("gs://") and export["kept_dir"].endswith(export["run_name"])
    kept = {name for name in up.objects if name.startswith(f"kept/{export['run_name']}/")}
    assert f"kept/{export['run_name']}/manifest.json" in kept
    assert f"kept/{export['run_name']}/hf-model/model.safetensors" in kept
    assert f"kept/{export['run_name']}/samples.md" in kept  # worker 0's before/after answers, once
    assert up.export_dirs == {0: True, 1: False}  # worker 1 ends after train


def test_the_kept_model_is_fetched_from_the_bucket_every_file_as_its_manifest_says(up):
    export = last_json_line(up.resumed["export"].stdout)
    assert up.fetched is not None and up.fetched.returncode == 0, up.fetched.stderr
    assert up.fetched.stdout.startswith(f"the model from {export['kept_dir']} is in {up.fetched_dir}: ")
    entries = json.loads((up.fetched_dir / "manifest.json").read_text())["files"]
    assert "hf-model/model.safetensors" in {e["path"] for e in entries}
    assert manifest_mismatches(str(up.fetched_dir), entries) == []


def test_a_further_up_redoes_nothing(up):
    for phase, done in up.again.items():
        assert done.returncode == 0, f"{phase}: {done.stdout[-2000:]}"
    assert up.jobs_after_again == up.jobs_before_again  # no new job on any worker: each re-attached
