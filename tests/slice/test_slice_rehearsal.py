"""The multi-host rehearsal (rehearsal/slice.py): the program's tasks for a v6e-16 slice, run against two simulated
hosts (an sshd each in its own namespaces: hostname, home, /dev/shm; rehearsal/slice_hosts.py), real MaxText on
the tiny model training as ONE JAX job across them (one CPU process per host, gloo), its checkpoints in
gcp-storage-emulator behind the IAM stand-in (the hosts act as their service account, with the roles the program
declared). The hosts' metadata numbers them in a shuffled order (the host the target lists first is worker 1 by its
tpu-env): the workers, the JAX coordinator and the worker followed are the metadata's, and hosts whose tpu-env
repeats or lacks an id are refused in one line.

The user closes the laptop right after convert starts (the convert command's process group is SIGKILLed), and
once the run has a checkpoint in the bucket Google restarts the slice (every host together): with nothing started
from the laptop, each host's start-up resumes the same attempt (run-2), which goes on from that checkpoint on both
workers to the model kept in the bucket, and every command run again re-attaches to it, starts nothing and prints
what it printed. Then a train setting changes (`pulumi config
set`): the run command starts a new run at train, and the train command follows it until the user cancels it from
the stack once it has a checkpoint (`scripts/tpu-sft cancel`, which stops it on every worker). The next `up`'s train
command resumes it from the bucket (the run command, unchanged since, is not run again), and one
worker's trainer is kill -9'd (what the kernel's OOM killer does): every worker stops and the error names that
worker. The user asks the stack (`scripts/tpu-sft status`) while the run goes on alone, once it has finished, while
the next one trains, and once it is cancelled, and fetches the kept model from the bucket. Last, Google restarts
the slice while the next `up`'s train starts, and worker 0 does not come back: worker 1 trains nothing and ends its
attempt with the reason; worker 0, back late, trains nothing either.

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

from infra.resources.tasks import last_json_line
from rehearsal import slice as slice_rehearsal
from rehearsal.metadata_standin import tpu_env
from rehearsal.run import Executed, start
from tests.procs import Watched, processes
from tests.remote.stack_commands import tpu_sft
from tests.ssh_testbed import wait_until
from tests.workload.tiny_run import TRAINER
from workload.core.config import PipelineConfig
from workload.core.contract import PIPELINE_ENV, TARGET_ENV
from workload.core.trainer_loop import TRAINER_LOOPS
from workload.run.commands import run_name
from workload.run.fingerprint import manifest_mismatches
from workload.run.progress import parse_event

STEPS, CHECKPOINT_PERIOD = 8, 4
LOOP = TRAINER_LOOPS[PipelineConfig.trainer]  # the rehearsal stack's tpu-sft:trainer, the default
PHASES = ("bootstrap", "convert", "train", "export")
# How long the restarted hosts wait for each other (workload/run/slice_rejoin.py WAIT_S, shortened): every host's
# start-up runs within a second of the others' here, and a host that does not come back costs this wait three times.
REJOIN_WAIT_S = 120.0
NEVER_BACK_WAIT_S = 10.0
CHANGED = {"tpu-sft:learningRate": "0.002"}  # a train setting: a new run, from train on


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


def checkpoints_prefix(rehearsal: slice_rehearsal.SliceRehearsal) -> str:
    """Where the run that the rehearsal's settings name keeps its checkpoints in the bucket (workload/run/layout.py)."""
    config = PipelineConfig.from_mapping(json.loads(rehearsal.command("train").environment[PIPELINE_ENV]))
    return f"{rehearsal.runs_prefix}/{config.model}/post-train/{run_name(config)}/checkpoints"


@dataclass
class SliceUp:
    rehearsal: slice_rehearsal.SliceRehearsal  # with the changed setting, from run-2 on
    addresses: tuple[str, ...]  # the hosts', in the target's order (they are gone once the fixture ends)
    worker_addresses: tuple[str, ...]  # the hosts', in worker order: their tpu-env's TPU_WORKER_ID
    bootstrap: Executed | None = None
    started: Executed | None = None  # the run task, which starts run-1 on every worker
    closed_output: str = ""  # what the convert command printed before the laptop closed
    checkpoint_at_restart: int | None = None  # the bucket's last checkpoint once Google's restart killed run-1
    trained_before_restart: int | None = None  # the final checkpoint, which run-1 must not have reached
    restart_lines: dict[int, str] = field(default_factory=dict)  # worker → its start-up's boot-resume line
    boot_ids: dict[int, str] = field(default_factory=dict)  # worker → its boot id after the restart
    attempt_boots: dict[int, tuple[str, ...]] = field(default_factory=dict)  # worker → run-1's and run-2's boot ids
    exits_unattended: dict[int, str] = field(default_factory=dict)  # worker → run-2's exit code, read once it ended
    resumed_events: dict[int, list[dict]] = field(default_factory=dict)  # worker → run-2's boot_resume and resume
    jobs_unattended: dict[int, list[str]] = field(default_factory=dict)  # each worker's jobs then
    kept_unattended: list[str] = field(default_factory=list)  # the bucket's kept manifests then
    printed_by_run: dict[str, dict] = field(default_factory=dict)  # until → the summary run-2 printed
    checkpoint_unattended: int | None = None  # run-2's last checkpoint in the bucket
    again: dict[str, Executed] = field(default_factory=dict)  # every command again, the laptop back
    jobs_after_again: dict[int, list[str]] = field(default_factory=dict)
    # `scripts/tpu-sft VERB` against the stack: "status alone" while run-1 went on with nobody following, "status
    # finished" once run-2 had ended; "status training", "cancel", "status cancelled", "logs cancelled" and "cancel
    # again" on run-3; "status never back" after the last restart; "fetch-model" at the end.
    asked: dict[str, subprocess.CompletedProcess] = field(default_factory=dict)
    restarted: Executed | None = None  # the changed setting's run task, which starts run-3
    cancelled: Executed | None = None  # the changed setting's train (following run-3), which the user cancelled
    checkpoint_at_cancel: int | None = None
    trainers_after_cancel: dict[int, Trainer] = field(default_factory=dict)
    broken: Executed | None = None  # the next train (run-4), resumed, in which a worker was killed
    killed: dict[int, int] = field(default_factory=dict)  # pid → worker id of the trainer killed
    trainers_at_kill: dict[int, Trainer] = field(default_factory=dict)  # every trainer, on either host
    trainers_after_failure: dict[int, Trainer] = field(default_factory=dict)
    refused: dict[str, Executed] = field(default_factory=dict)  # train on hosts whose tpu-env has no whole order
    jobs_at_end: dict[int, list[str]] = field(default_factory=dict)
    export_dirs: dict[int, bool] = field(default_factory=dict)  # worker → has an export in its own /dev/shm
    local_train_steps: dict[int, list[str]] = field(default_factory=dict)  # worker → train steps in ~/jax_cache
    objects: dict[str, int] = field(default_factory=dict)
    storage_refusals: list[str] = field(default_factory=list)  # every 403 Cloud Storage gave the hosts
    never_back_of: str | None = None  # the attempt the last restart ended (run-5)
    never_back: dict[int, list[dict]] = field(default_factory=dict)  # worker → run-6's events, worker 0 not back
    never_back_lines: dict[int, str] = field(default_factory=dict)  # worker → its start-up's line
    never_back_exits: dict[int, str] = field(default_factory=dict)
    fetched: subprocess.CompletedProcess | None = None  # `scripts/tpu-sft fetch-model` from the bucket, at the end
    fetched_dir: Path | None = None
    seconds: float = 0.0

    def jobs(self) -> dict[int, list[str]]:
        return {
            h.worker_id: sorted(p.name for p in (h.home / ".tpu-sft" / "jobs").iterdir())
            for h in self.rehearsal.hosts.hosts
        }

    def exit_file(self, worker: int, job: str) -> Path:
        return self.job(worker, job) / "exit"

    def job(self, worker: int, job: str) -> Path:
        return self.rehearsal.hosts.by_worker_id(worker).home / ".tpu-sft" / "jobs" / job

    def events(self, worker: int, job: str) -> list[dict]:
        """The job's progress events (its log's JSON lines)."""
        lines = (self.job(worker, job) / "log").read_text().splitlines()
        return [e for e in map(parse_event, lines) if e is not None]

    def ask(self, name: str, *verb: str, **env: str) -> subprocess.CompletedProcess:
        """`scripts/tpu-sft VERB`, the `pulumi` CLI answering with the stack's outputs, their `target` as the rehearsal
        substitutes it (every task's is the same), the user's own access to the bucket its owner's."""
        target = self.rehearsal.environment(self.rehearsal.command("train"))[TARGET_ENV]
        asking = self.rehearsal.directory / "asking"
        asking.mkdir(exist_ok=True)
        self.asked[name] = tpu_sft(asking, {**self.rehearsal.outputs, "target": target}, *verb, env=env)
        return self.asked[name]


def close_the_laptop_after_convert_starts(up: SliceUp) -> None:
    """Start the convert command in a process group of its own and SIGKILL the whole group once the run says convert
    started, as a laptop that sleeps takes its `pulumi up` with it; ask where the run stands once it trains; once it
    has a checkpoint in the bucket, Google restarts the slice; then, starting nothing, wait for the attempt the
    hosts' start-ups began to end on every worker (their exit files: the job's own handshake)."""
    command = up.rehearsal.command("convert")
    watched = Watched(proc := start(command, up.rehearsal.environment(command), new_session=True))
    watched.read_until("▶ convert")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    up.closed_output = watched.stdout + watched.stderr
    assert proc.returncode == -signal.SIGKILL, up.closed_output
    log = up.job(0, "run-1") / "log"
    train_started = '"phase": "train", "status": "start"'
    wait_until(lambda: log.exists() and train_started in log.read_text(), 1800, "run-1 to go on to train alone")
    up.ask("status alone", "status")
    google_restarts_the_slice_mid_train(up)
    assert all(line.endswith(": started run-2") for line in up.restart_lines.values()), up.restart_lines
    for worker in (0, 1):
        wait_until(up.exit_file(worker, "run-2").exists, 3600, f"run-2 to end on worker {worker}")
        up.exits_unattended[worker] = up.exit_file(worker, "run-2").read_text().strip()
        up.resumed_events[worker] = [e for e in up.events(worker, "run-2") if e["event"] in ("boot_resume", "resume")]
        up.attempt_boots[worker] = tuple((up.job(worker, j) / "boot_id").read_text().strip() for j in up.jobs()[worker])
    up.jobs_unattended = up.jobs()
    up.checkpoint_unattended = up.rehearsal.emulator.latest_checkpoint(checkpoints_prefix(up.rehearsal))
    up.kept_unattended = sorted(n for n in up.rehearsal.emulator.objects("kept/") if n.endswith("/manifest.json"))
    up.printed_by_run = {e["until"]: e for e in up.events(0, "run-2") if e["event"] == "summary"}


def google_restarts_the_slice_mid_train(up: SliceUp) -> None:
    """Once run-1 has a checkpoint in the bucket, short of its last, Google restarts every host together
    (rehearsal/slice.py `google_restart`), and each host's start-up runs its resume step."""
    checkpoints = checkpoints_prefix(up.rehearsal)
    wait_until(lambda: up.rehearsal.emulator.latest_checkpoint(checkpoints) is not None, 1800, "run-1's checkpoint")
    up.restart_lines = up.rehearsal.google_restart(REJOIN_WAIT_S)
    up.checkpoint_at_restart = up.rehearsal.emulator.latest_checkpoint(checkpoints)  # the old boots' last
    up.boot_ids = {h.worker_id: h.boot_id for h in up.rehearsal.hosts.hosts}


def follow_train_and_cancel_it_from_the_stack(up: SliceUp) -> None:
    """The changed setting's run command starts a new run, at train, and the train command follows it; once a
    checkpoint of it is in the bucket, the user cancels it from another terminal (`scripts/tpu-sft cancel`), and the
    command following it says so."""
    up.restarted = up.rehearsal.run("run")
    assert up.restarted.returncode == 0, up.restarted.stdout[-2000:] + up.restarted.stderr[-2000:]
    command = up.rehearsal.command("train")
    checkpoints = checkpoints_prefix(up.rehearsal)
    watched = Watched(proc := start(command, up.rehearsal.environment(command)))
    watched.read_until("train: job ")  # every worker's job claimed: it is being followed from now on
    while up.rehearsal.emulator.latest_checkpoint(checkpoints) is None:
        assert proc.poll() is None, "train ended before its first checkpoint reached the bucket"
        time.sleep(0.5)
    up.ask("status training", "status")
    up.ask("cancel", "cancel")
    up.checkpoint_at_cancel = up.rehearsal.emulator.latest_checkpoint(checkpoints)  # the last: every worker stopped
    watched.rest()
    up.cancelled = Executed(command.name, proc.wait(), watched.stdout, watched.stderr, 0.0)
    up.trainers_after_cancel = trainers()
    up.ask("status cancelled", "status")
    up.ask("logs cancelled", "logs")
    up.ask("cancel again", "cancel")


def follow_train_and_kill_worker_1(up: SliceUp) -> None:
    """The next `up`'s train command resumes the run from the bucket; once both trainers run, worker 1's is kill -9'd
    while the command follows."""
    command = up.rehearsal.command("train")
    watched = Watched(proc := start(command, up.rehearsal.environment(command)))
    watched.read_until("↻ train resumes from checkpoint ")
    while len(up.trainers_at_kill) < 2:  # a scan of /proc: not 50 times a second
        assert proc.poll() is None, "train ended before both trainers ran"
        time.sleep(0.5)
        up.trainers_at_kill = trainers()
    up.killed = {pid: trainer.worker for pid, trainer in up.trainers_at_kill.items() if trainer.worker == 1}
    for pid in up.killed:
        os.kill(pid, signal.SIGKILL)
    watched.rest()
    up.broken = Executed(command.name, proc.wait(), watched.stdout, watched.stderr, 0.0)


def google_restarts_the_slice_and_worker_0_never_comes_back(up: SliceUp) -> None:
    """The next `up`'s train starts run-5 on both workers; Google restarts the slice, the laptop's command ends with
    the old boots, and worker 0 does not come back: worker 1's start-up begins run-6, which waits for worker 0's
    decision and ends. Then worker 0 comes back, late: its run-6 waits for worker 1, which gave up, and ends too."""
    command = up.rehearsal.command("train")
    watched = Watched(proc := start(command, up.rehearsal.environment(command), new_session=True))
    watched.read_until("train: job ")
    claimed = watched.stdout.rpartition("train: job ")[2].split()
    assert claimed, f"the train command claimed no job: {watched.stdout[-2000:]}"
    up.never_back_of = claimed[0]  # run-5, unless an attempt before failed
    for worker in (0, 1):
        wait_until((up.job(worker, claimed[0]) / "boot_id").exists, 300, f"{claimed[0]} to start on worker {worker}")
    up.never_back_lines = up.rehearsal.google_restart(NEVER_BACK_WAIT_S, down=(0,))
    os.killpg(proc.pid, signal.SIGKILL)  # the laptop's SSH sessions died with the old boots
    proc.wait()
    wait_for_the_attempt_its_start_up_began(up, 1)
    up.rehearsal.hosts.come_back(0)  # late: worker 1 has given up
    up.never_back_lines[0] = up.rehearsal.start_up(0, NEVER_BACK_WAIT_S)
    wait_for_the_attempt_its_start_up_began(up, 0)
    up.ask("status never back", "status")


def wait_for_the_attempt_its_start_up_began(up: SliceUp, worker: int) -> None:
    """Until the attempt the worker's last start-up began has ended; then keep its exit code and events."""
    began = up.never_back_lines[worker].partition(": started ")[2]
    assert began, f"worker {worker}'s start-up began no attempt: {up.never_back_lines[worker]}"
    wait_until(up.exit_file(worker, began).exists, 600, f"worker {worker}'s {began} to end")
    up.never_back_exits[worker] = up.exit_file(worker, began).read_text().strip()
    up.never_back[worker] = up.events(worker, began)


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
        result.bootstrap = rehearsal.run("bootstrap")
        assert result.bootstrap.returncode == 0, result.bootstrap.stdout[-3000:]
        result.started = rehearsal.run("run")
        assert result.started.returncode == 0, result.started.stdout[-3000:]
        close_the_laptop_after_convert_starts(result)
        result.ask("status finished", "status")
        result.again = {phase: rehearsal.run(phase) for phase in PHASES}  # the laptop back: the same `pulumi up`
        result.jobs_after_again = result.jobs()
        result.rehearsal = rehearsal = rehearsal.with_settings(CHANGED)
        follow_train_and_cancel_it_from_the_stack(result)
        follow_train_and_kill_worker_1(result)
        result.trainers_after_failure = trainers()
        result.jobs_at_end = result.jobs()
        first, second = hosts.hosts  # in the target's order: workers 1 and 0
        for case, text in (
            ("repeated", tpu_env(first.worker_id, 2)),
            ("missing", tpu_env(second.worker_id, 2).replace(f"TPU_WORKER_ID: '{second.worker_id}'\n", "")),
        ):
            second.metadata.set("tpu-env", text)
            result.refused[case] = rehearsal.run("train")
        second.metadata.set("tpu-env", tpu_env(second.worker_id, 2))
        assert result.jobs() == result.jobs_at_end  # nothing started on a slice without a whole order
        result.export_dirs = {
            h.worker_id: h.path("/dev/shm/tpu-sft/gemma3-4b/hf-trained/config.json").is_file()
            for h in rehearsal.hosts.hosts
        }
        result.local_train_steps = {
            h.worker_id: sorted(p.name for p in (h.home / "jax_cache").glob("*train_step-*"))
            for h in rehearsal.hosts.hosts
        }
        google_restarts_the_slice_and_worker_0_never_comes_back(result)
        result.objects = rehearsal.emulator.objects()
        result.storage_refusals = list(rehearsal.storage.refusals)
        # The user fetches the kept model with their own access (the bucket's owner), the hosts' target the stack's.
        result.fetched_dir = tmp_path_factory.mktemp("fetched") / "model"
        result.fetched = result.ask(
            "fetch-model", "fetch-model", str(result.fetched_dir), STORAGE_EMULATOR_HOST=rehearsal.emulator.url
        )
    result.seconds = time.monotonic() - started
    print(f"\nslice rehearsal on 2 hosts: {result.seconds:.0f} s", flush=True)
    return result


def _worker_0_and_1(up: SliceUp) -> tuple[str, str]:
    """How the commands name workers 0 and 1 before their state: "0 ADDRESS ("."""
    return f"0 {up.worker_addresses[0]} (", f"1 {up.worker_addresses[1]} ("


def test_every_worker_ran_each_phase_as_its_own_jax_process(up):
    convert = last_json_line(up.again["convert"].stdout)
    assert convert["ok"] and convert["worker"] == 0  # worker 0 is followed
    # The run the laptop left and its boot-resume, then the changed setting's, cancelled, and its resume, which a
    # worker broke.
    jobs = ["run-1", "run-2", "run-3", "run-4"]
    assert up.jobs_at_end == {0: jobs, 1: jobs}
    train = up.printed_by_run["train"]
    assert train["ok"] and train["final_step"] == STEPS and up.checkpoint_unattended == LOOP.checkpoint_step(STEPS)
    assert train["devices"] == 2  # one JAX job over both hosts' CPU devices, not two jobs of one device each


def test_a_closed_laptop_leaves_the_run_going_on_every_worker_to_the_kept_model(up):
    """Everything the rehearsal started was killed right after convert started, but the hosts, which Google then
    restarted: the run went on alone on both workers to the model kept in the bucket with its manifest, and every
    command run again after it re-attaches to the attempt the start-ups began on both workers, starts nothing, and
    prints what the run printed for its part."""
    assert up.started is not None and last_json_line(up.started.stdout)["job"] == "run-1"  # the run task's
    assert "convert: job run-1 on 2 workers: " in up.closed_output and "▶ convert" in up.closed_output
    assert up.exits_unattended == {0: "0", 1: "0"}
    assert up.jobs_unattended == {0: ["run-1", "run-2"], 1: ["run-1", "run-2"]}
    run_name = up.printed_by_run["keep"]["run_name"]
    assert up.kept_unattended == [f"kept/{run_name}/manifest.json"]
    assert up.printed_by_run["keep"]["kept_dir"].endswith(f"/kept/{run_name}")
    assert "already done" in up.again["bootstrap"].stdout + up.again["bootstrap"].stderr
    for phase, until in (("convert", "convert"), ("train", "train"), ("export", "keep")):
        again = up.again[phase]
        assert again.returncode == 0, again.stdout[-2000:]
        assert f"{phase}: job run-2 on 2 workers: " in again.stdout and again.stdout.count("(succeeded)") == 2
        assert last_json_line(again.stdout) == up.printed_by_run[until]
    assert up.jobs_after_again == up.jobs_unattended


def run_dir(up: SliceUp, run_name: str) -> str:
    """A run's prefix in the bucket (workload/run/layout.py), where its checkpoints and boot-resume records lie."""
    return f"{up.rehearsal.runs_prefix}/{PipelineConfig.model}/post-train/{run_name}"


def test_google_restarts_the_slice_and_every_host_resumes_the_same_attempt(up):
    """Google restarted both hosts together after run-1's checkpoint N, short of its last: each host's start-up began
    run-2 with the declared startup script's resume step, the two met in the bucket (workload/run/slice_rejoin.py),
    worker 0 decided for both, and training went on from checkpoint N on both hosts, to the model worker 0 kept."""
    assert up.checkpoint_at_restart is not None and up.checkpoint_at_restart < LOOP.checkpoint_step(STEPS)
    started = "tpu-sft boot-resume: run-1 died with its boot (no exit record, started in another boot): started run-2"
    assert up.restart_lines == {0: started, 1: started}
    for worker in (0, 1):  # run-2 is the new boot's, on both hosts
        old_boot, new_boot = up.attempt_boots[worker]
        assert new_boot == up.boot_ids[worker] != old_boot
    zero, one = ([e for e in up.resumed_events[w] if e["event"] == "boot_resume"] for w in (0, 1))
    assert [(e["status"], e["of"], e["checkpoint"]) for e in zero + one] == [
        ("resumed", "run-1", up.checkpoint_at_restart)
    ] * 2
    assert one[0]["reason"] == "run-1 died with its boot; worker 0 resumes it on every worker"
    resumed = next(e for e in up.resumed_events[0] if e["event"] == "resume")
    assert resumed["checkpoint"] == up.checkpoint_at_restart  # training went on from the old boots' last checkpoint
    assert up.exits_unattended == {0: "0", 1: "0"} and up.printed_by_run["keep"]["ok"]
    rendezvous = f"{run_dir(up, up.printed_by_run['keep']['run_name'])}/"
    assert {n.removeprefix(rendezvous) for n in up.objects if n.startswith(rendezvous) and "checkpoints/" not in n} >= {
        "boot-resumes.json",
        "boot-resume/run-1/worker-1.json",
        "boot-resume/run-1/decision.json",
    }


def test_a_host_that_never_comes_back_means_no_host_trains(up):
    """Google restarted the slice as the next `up`'s train began run-5, and worker 0 did not come back: worker 1's
    start-up began run-6, which waited for worker 0's decision and ended before any step; worker 0, back once
    worker 1 had given up, began its own run-6, which did not train alone either. Each says why, and `tpu-sft
    status` shows worker 0's reason; the budget kept no resume of the run."""
    started = "tpu-sft boot-resume: run-5 died with its boot (no exit record, started in another boot): started run-6"
    assert up.never_back_of == "run-5" and up.never_back_lines == {1: started, 0: started}
    assert up.never_back_exits == {0: "1", 1: "1"}
    for worker in (0, 1):
        assert not [e for e in up.never_back[worker] if e["event"] in ("phase", "step")]  # no step began
    (one,) = [e for e in up.never_back[1] if e["event"] == "boot_resume"]
    waited = 2 * NEVER_BACK_WAIT_S + NEVER_BACK_WAIT_S / 4  # twice the wait, and the margin
    assert (one["status"], one["of"]) == ("refused", "run-5")
    assert one["reason"].startswith(f"worker 0 decided nothing on run-5's resume within {waited:g} s: ")
    (zero,) = [e for e in up.never_back[0] if e["event"] == "boot_resume"]
    assert zero["status"] == "refused"
    assert zero["reason"].startswith(
        f"worker 1 of the slice did not rejoin run-5's resume within {NEVER_BACK_WAIT_S:g} s"
    )
    status = up.asked["status never back"]
    assert status.stdout.splitlines()[1] == f"run run-6: failed · stopped: not resumed at boot: {zero['reason']}", (
        status
    )
    changed = PipelineConfig.from_mapping(json.loads(up.rehearsal.command("train").environment[PIPELINE_ENV]))
    assert f"{run_dir(up, run_name(changed))}/boot-resumes.json" not in up.objects


def test_the_user_asks_the_slice_where_its_run_stands_alone_and_finished(up):
    """`scripts/tpu-sft status` reads worker 0's run (by the metadata, not the first host the target lists), and
    says each worker's state of it."""
    zero, one = _worker_0_and_1(up)
    alone = up.asked["status alone"]
    assert alone.returncode == 0, alone.stderr
    vm, run, workers = alone.stdout.splitlines()
    group = up.rehearsal.outputs["instanceGroupName"]
    assert vm == f"slice {group}: 2 workers answer SSH (worker 0 at {up.worker_addresses[0]})"
    assert run.startswith("run run-1: running · ")
    assert workers == f"workers: {zero}running), {one}running)"
    finished = up.asked["status finished"]
    assert finished.returncode == 0, finished.stderr
    keep = up.printed_by_run["keep"]
    assert finished.stdout.splitlines()[1:] == [
        f"run run-2: succeeded · finished: every step up to eval done (step {STEPS}, loss {keep['final_loss']:.4f}, "
        f"model kept in {keep['kept_dir']}) · eval: off (tpu-sft:evalTasks off) · resumed at boot: run-1 died with "
        f"its boot (1 of 3 at checkpoint "
        f"{up.checkpoint_at_restart})",
        f"workers: {zero}succeeded), {one}succeeded)",
    ]


def test_the_workers_follow_the_hosts_metadata_not_the_targets_order(up):
    """The target lists the hosts as the program does (by instance name); worker 0 is the host whose tpu-env says
    0, here the second: it is followed, it is JAX's coordinator for every trainer, and it alone exports."""
    assert up.worker_addresses == (up.addresses[1], up.addresses[0])  # shuffled: the first listed is worker 1
    coordinator = up.worker_addresses[0]
    convert = up.again["convert"].stdout
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


def test_a_changed_train_setting_starts_a_new_run_at_train(up):
    restarted, cancelled = up.restarted, up.cancelled
    assert restarted is not None and cancelled is not None
    assert "run-2 is not whole on every worker, or runs with other settings" in restarted.stderr
    assert last_json_line(restarted.stdout) == {
        "event": "summary",
        "phase": "run",
        "ok": True,
        "job": "run-3",
        "state": "running",
        "started": True,
    }
    assert "train: job run-3 on 2 workers: " in cancelled.stdout
    assert "▶ convert" not in cancelled.stdout and "▶ train" in cancelled.stdout  # convert's output is reused
    assert up.checkpoint_at_cancel is not None  # the new run's own, under its own name
    assert up.printed_by_run["keep"]["run_name"] not in checkpoints_prefix(up.rehearsal)


def test_a_run_cancelled_from_the_stack_stops_on_every_worker(up):
    zero, one = _worker_0_and_1(up)
    training = up.asked["status training"].stdout.splitlines()
    assert training[1].startswith("run run-3: running · train running"), training
    cancel = up.asked["cancel"]
    assert cancel.returncode == 0, cancel.stderr
    assert cancel.stdout == (
        f"run run-3 cancelled on 2 workers: {zero}cancelled), {one}cancelled); done steps and saved checkpoints "
        "stay; the next `pulumi up` resumes it\n"
    )
    cancelled = up.cancelled
    assert cancelled is not None
    summary = last_json_line(cancelled.stdout)
    assert cancelled.returncode != 0 and summary["ok"] is False and "cancelled" in summary["error"], summary
    assert up.trainers_after_cancel == {}
    status = up.asked["status cancelled"].stdout.splitlines()
    assert status[1].startswith("run run-3: cancelled · ")
    assert status[2] == f"workers: {zero}cancelled), {one}cancelled)"
    logs = up.asked["logs cancelled"].stdout.splitlines()  # worker 0's: the one that runs every step
    assert "▶ train" in logs and "▶ convert" not in logs and not logs[-1].startswith("summary: "), logs
    assert up.asked["cancel again"].stdout == "run run-3 already cancelled on every worker: nothing to cancel\n"


def test_the_next_up_resumes_the_cancelled_run_from_the_bucket(up):
    broken = up.broken
    assert broken is not None
    assert "train: job run-4 on 2 workers: " in broken.stdout
    assert up.checkpoint_at_cancel is not None
    assert f"↻ train resumes from checkpoint {up.checkpoint_at_cancel} in gs://" in broken.stdout


def test_a_killed_worker_stops_every_worker_and_is_named(up):
    broken = up.broken
    assert broken is not None
    summary = last_json_line(broken.stdout)
    host = up.worker_addresses[1]
    assert up.killed and set(up.killed.values()) == {1}
    assert broken.returncode != 0 and summary["ok"] is False
    assert (summary["worker"], summary["host"]) == (1, host)
    assert summary["error"].startswith(f"worker 1 ({host}): job run-4 ")
    assert "failed: exited with code 1 (killed by signal 9 (SIGKILL" in summary["error"]  # its own reason
    assert f"✗ worker 1 ({host})" in broken.stdout
    assert up.trainers_after_failure == {}  # worker 0's trainer did not outlive the failure


def test_no_worker_loads_a_train_step_another_compiled(up):
    """On CPU, JAX's cache keys differ between processes and only process 0 writes entries (workload/run/commands.py
    says why): with a cache, in the bucket or each host's ~/jax_cache, the resumed train loaded worker 0's step and
    compiled worker 1's, worker 0 reached the first step minutes early under load, past gloo's 30 s, and it aborted.
    The CPU slice trains with none, so every worker compiles, as in a first train."""
    assert not any("train_step-" in name for name in up.objects if name.startswith("runs/jax-cache/"))
    assert up.local_train_steps == {0: [], 1: []}


def test_the_hosts_declared_grant_covered_every_request_they_made(up):
    assert up.storage_refusals == []  # not one 403 from Cloud Storage, the resume included


def test_export_and_keep_ran_once_into_the_bucket(up):
    export = up.printed_by_run["keep"]
    assert export["ok"] and export["verify"]["ok"]
    assert export["kept_dir"].startswith("gs://") and export["kept_dir"].endswith(export["run_name"])
    kept = {name for name in up.objects if name.startswith(f"kept/{export['run_name']}/")}
    assert f"kept/{export['run_name']}/manifest.json" in kept
    assert f"kept/{export['run_name']}/hf-model/model.safetensors" in kept
    assert f"kept/{export['run_name']}/samples.md" in kept  # worker 0's before/after answers, once
    assert up.export_dirs == {0: True, 1: False}  # worker 1 ends after train


def test_the_kept_model_is_fetched_from_the_bucket_every_file_as_its_manifest_says(up):
    export = up.printed_by_run["keep"]
    assert up.fetched is not None and up.fetched.returncode == 0, up.fetched.stderr
    assert up.fetched.stdout.startswith(f"the model from {export['kept_dir']} is in {up.fetched_dir}: ")
    entries = json.loads((up.fetched_dir / "manifest.json").read_text())["files"]
    assert "hf-model/model.safetensors" in {e["path"] for e in entries}
    assert manifest_mismatches(str(up.fetched_dir), entries) == []
