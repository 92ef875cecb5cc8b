"""The whole first `pulumi up` against a simulated new VM, a Spot VM in its group of one (tpu-sft:recovery auto),
which Google preempts mid-training; the group recreates it and its start-up alone resumes the run, until Google
restarts that VM mid-training and its start-up finishes the run alone; a further `up` finds everything done; Google
restarts the VM once more; Google preempts it again and the group recreates it; an `up` on that VM.

1. evaluate the real program under the mock engine (rehearsal/Pulumi.rehearsal.yaml, tiny profile, training on
   the user's own JSON Lines file with a share held out: own_data.py; SPOT, no reservation, so the VM is the group's)
   and read what it declared: the group and its template, with the VM's `ssh-keys` and `startup-script` metadata,
   the data disk's device name, the checkpoint bucket and the VM's grants on it (gcp-storage-emulator on this
   machine, behind the IAM stand-in, rehearsal/storage_iam.py: the VM's clients reach it as the VM's service account,
   and get Google's 403 for whatever its declared roles do not allow), and the file's copies in that bucket, which
   are written there as pulumi-gcp would (rehearsal/bucket_objects.py);
2. "create" the VM (it boots on its own) and at once run the recorded post-deploy commands as pulumi-command
   does, pointed at the VM's address, with the real bootstrap spec transformed by substitutions.py;
3. once training has a checkpoint in the bucket, Google preempts the VM, and the group (rehearsal/managed_group.py)
   recreates it under its name with a new boot disk and the same data disk (group_repair.py); that `up` ends there,
   and nothing more is run from the laptop: the new boot's start-up must restore what the tasks kept on the data disk
   and start the run's next attempt, which installs what the boot disk lost and resumes from the bucket;
4. once a later checkpoint is in the bucket, Google restarts that VM (google_restart.py; the same startup script
   and kit as a STANDARD VM's group, whose template differs only in its scheduling): its start-up must start the
   run's next attempt, which resumes from that checkpoint and runs to keep;
5. run every command again on that VM (a further `up`, a new instance id: each must find its work done);
6. Google restarts the VM again: the finished run must not start;
7. Google preempts the VM again and the group recreates it: the startup script must mount, not format, the data
   disk, start nothing and install nothing, and the kept model must still be there;
8. the next `up` on that VM (a new instance id: every command runs again): the run is finished, so nothing may be
   redone and the kept model's bytes must not change.
9. where a Hub is given (`publish`): autostop empties the group, the user adds tpu-sft:publishHubRepo, and the next
   `up` declares no VM and publishes the kept model from the bucket on this machine (infra/resources/bucket_publish.py).
Every output line is timestamped as it arrives, so the evidence (evidence.py) can order client and VM events.
"""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, TextIO

from infra.resources.tasks import last_json_line
from rehearsal import bucket_objects, storage_iam
from rehearsal.engine import Stack
from rehearsal.fresh_vm import google_restart, group_repair, own_data
from rehearsal.fresh_vm.address import claim_address
from rehearsal.fresh_vm.declared import DeclaredVm
from rehearsal.fresh_vm.disk import SIMULATED_SIZE_GB, LoopDisk
from rehearsal.fresh_vm.image import cached_image
from rehearsal.fresh_vm.machine import GCE_LIKE, Boot, FreshVm, Timeline, discard
from rehearsal.fresh_vm.substitutions import PLATFORM, StorageEndpoint, Substitution, provision_boot_disk, transform
from rehearsal.run import Executed, Recorded, left_by, record, start
from rehearsal.sshd import keygen
from remote.pipeline.bootstrap.spec import BootstrapSpec
from remote.pipeline.profile import HostProfile
from remote.pipeline.request import PhaseRequest
from remote.pipeline.target import PipelineTarget
from workload.core.contract import PIPELINE_ENV, SCRATCH_DIR, TARGET_ENV
from workload.run.fingerprint import manifest
from workload.run.progress import parse_event

CONFIG = Path(__file__).resolve().parent.parent / "Pulumi.rehearsal.yaml"
# A Spot VM, which the program puts in a group of one that recreates it (infra/resources/vm_group.py); a reservation
# would make it RESERVATION_BOUND, which keeps the plain VM.
IN_A_GROUP = {"tpu-sft:provisioningModel": "SPOT"}
NO_RESERVATION = ("tpu-sft:reservation",)
# Training is interrupted twice, each time after a checkpoint and before the last: Google preempts the VM after the
# first, then restarts the recreated one after a later one. The rehearsal stack's 10 (of 20 steps) leaves room for one.
CHECKPOINT_PERIOD = 5
STARTUP_WAIT_S = 120
# The attempt the recreated VM's start-up began installs, converts and trains to a later checkpoint: at a load average
# of 10 to 15 on 2 cores (2026-12-07), boot → training resumed took 474 s, boot → checkpoint 10 about 620 s.
LATER_CHECKPOINT_WAIT_S = 1200


class RehearsalFailed(RuntimeError):
    pass


@dataclass(frozen=True)
class Line:
    at: float  # unix time it arrived
    boot: int  # the VM's boot it was printed during
    command: str
    stream: str
    text: str


@dataclass
class FreshVmRun:
    address: str
    image: Path
    substitutions: list[Substitution]
    boots: list[Boot] = field(default_factory=list)
    lines: list[Line] = field(default_factory=list)
    first_up: list[Executed] = field(default_factory=list)  # up to the train phase the preempted VM ended
    lost_at_checkpoint: int | None = None  # the last checkpoint in the bucket when the VM was preempted
    recreations: list[group_repair.Recreation] = field(default_factory=list)  # mid-training, then after the run
    restarts: list[google_restart.Restart] = field(default_factory=list)  # mid-training, then after the run
    second_up: list[Executed] = field(default_factory=list)
    second_up_inputs_unchanged: bool = False
    host_public_keys: list[str] = field(default_factory=list)  # the VM's /etc/ssh/ssh_host_*_key.pub at boot 1
    known_hosts: str = ""  # what the client pinned
    summary: dict = field(default_factory=dict)  # the export phase's JSON summary, in the further up
    bucket_objects: dict[str, int] = field(default_factory=dict)  # the checkpoint bucket at the end
    data_objects: dict[str, int] = field(default_factory=dict)  # the declared copies of the user's file, written
    train_argv: list[str] = field(default_factory=list)  # MaxText's training argv on the VM that finished it
    storage_refusals: list[str] = field(default_factory=list)  # every 403 Cloud Storage gave the VM's clients
    kept_after_recreate: list[str] = field(default_factory=list)  # the kept model's files, seen from the last boot
    kept_train_steps: list[dict] = field(default_factory=list)  # its metrics/train_steps.jsonl: the loss curve
    kept_manifest: dict = field(default_factory=dict)  # its manifest.json, which its copy in the bucket must match
    after_finished_up: list[Executed] = field(default_factory=list)  # every command, on the VM after the finished run
    kept_before: list[dict] = field(default_factory=list)  # the kept model's files and sha256, before that `up`
    kept_after: list[dict] = field(default_factory=list)  # and after it
    publish_declared: list[str] = field(default_factory=list)  # the publish-only `up`'s resource types
    publish_up: list[Executed] = field(default_factory=list)  # and the commands it ran
    boots_before_publish: int = 0
    vm_created_at: float = 0.0
    first_train_step_at: float | None = None
    finished_at: float = 0.0


@dataclass(frozen=True)
class HubDestination:
    """A Hub to publish to with no VM (step 10): its endpoint, the repo, and a write token it accepts."""

    endpoint: str
    repo: str
    token: str


def identity_overrides(key: Path | str) -> dict[str, str]:
    """The stack's one SSH identity (tpu-sft:sshPublicKey), its private half where `pulumi up` looks for it."""
    public = Path(f"{key}.pub")
    return {"tpu-sft:sshPublicKeyPath": str(public), "tpu-sft:sshPublicKey": public.read_text().strip()}


def rehearse(
    directory: Path,
    *,
    steps: int | None = None,
    timeline: Timeline = GCE_LIKE,
    out: TextIO = sys.stdout,
    publish: HubDestination | None = None,
) -> FreshVmRun:
    def say(text: str) -> None:
        print(f"fresh-vm: {text}", file=out, flush=True)

    directory.mkdir(parents=True, exist_ok=True)
    for stale in ("known_hosts", "data-disk.img", "boot-disks", "client"):
        _remove(directory / stale)  # a rehearsal starts from a new VM and a blank disk
    image = cached_image(say)
    key = keygen(_mkdir(directory / "client") / "id_ed25519")
    overrides = {**identity_overrides(key), **own_data.overrides(own_data.write(directory))}
    overrides["tpu-sft:checkpointPeriod"] = str(CHECKPOINT_PERIOD)
    # The benchmarks are the local rehearsal's (python -m rehearsal); vLLM TPU would not install here.
    overrides["tpu-sft:evalTasks"] = "off"
    if steps is not None:
        overrides["tpu-sft:steps"] = str(steps)
    stack, commands = record(CONFIG, {**overrides, **IN_A_GROUP}, remove=NO_RESERVATION)
    declared = DeclaredVm.of(stack)
    group = declared.group
    if group is None:
        raise RehearsalFailed("the program declared a plain VM, not the group of one a Spot VM gets")
    spec, made = transform(real_spec(commands[0]))
    train = next(c for c in commands if c.name.endswith("-train"))
    until_train = commands[: commands.index(train)]
    checkpoint_period = json.loads(train.environment[PIPELINE_ENV])["checkpointPeriod"]
    recorded_target = PipelineTarget.from_json(train.environment[TARGET_ENV])
    declared_profile = recorded_target.profile
    runs_url = declared_profile.runs_dir or ""
    runs_prefix = runs_url.removeprefix("gs://").partition("/")[2]
    declared_storage = storage_iam.DeclaredStorage.of(stack)
    cloud_storage = storage_iam.start(declared_storage, directory / "storage-emulator.log")
    emulator = cloud_storage.emulator
    # The third kind of host (remote/pipeline/profile.py): the declared VM's in every fact but how MaxText is installed.
    profile = dataclasses.replace(declared_profile, name="fresh-vm", bootstrap=spec.to_mapping())
    address, address_lock = claim_address()
    storage = StorageEndpoint(cloud_storage.env(declared_storage.host), declared_storage.host)
    result = FreshVmRun(address, image, [*PLATFORM, storage.substitution, *made])
    for substitution in result.substitutions:
        say(substitution.line())
    disk = LoopDisk(directory / "data-disk.img", min(declared.data_disk_size_gb, SIMULATED_SIZE_GB))
    vm = FreshVm(
        declared, address, disk, directory, directory / "boot-disks", [provision_boot_disk, storage.provision], timeline
    )

    def up(commands: list[Recorded], into: list[Executed]) -> None:
        for command in commands:
            env = target_env(command, profile, address, directory)
            into.append(execute_timestamped(command, env, result, out))

    def preempt_after_checkpoint(following: subprocess.Popen) -> None:
        """A Spot preemption: once a checkpoint is in the bucket, Google preempts the VM, with whatever its trainer was
        doing, and the group recreates it; the laptop's train command ends with the old VM."""
        while (emulator.latest_checkpoint(runs_prefix) or 0) < checkpoint_period:
            if following.poll() is not None:
                return
            time.sleep(0.5)
        result.host_public_keys = [
            p.read_text().strip() for p in sorted(Path(f"/proc/{vm.pid}/root/etc/ssh").glob("ssh_host_*_key.pub"))
        ]
        result.known_hosts = (directory / "known_hosts").read_text()
        try:
            recreated = group_repair.preempt(
                vm, group, image, user, lambda: emulator.latest_checkpoint(runs_prefix), gone=following.terminate
            )
        except (RuntimeError, TimeoutError) as e:
            following.terminate()
            raise RehearsalFailed(f"the group's recreation mid-training: {e}") from None
        result.recreations.append(recreated)
        result.boots.append(recreated.boot.boot)
        result.lost_at_checkpoint = recreated.boot.at_checkpoint
        say(
            f"Google preempted the VM after checkpoint {result.lost_at_checkpoint} reached the bucket; the group "
            f"recreated {recreated.made.name} (instance {recreated.lost.instance_id} → {recreated.made.instance_id}, "
            f"a new boot disk, data disk {', '.join(recreated.made.disks)} kept; boot {recreated.boot.boot.number}); "
            f"this `pulumi up` ended with the old VM, and nothing more runs from the laptop. The start-up: "
            f"{recreated.boot.startup_line.strip()}"
        )

    def restart_after_a_later_checkpoint(attempt: str) -> None:
        """Google's restart of the recreated VM (host maintenance, a host error, a crash), once a checkpoint later than
        the one its attempt resumed from is in the bucket; nothing from the laptop."""
        deadline = time.monotonic() + LATER_CHECKPOINT_WAIT_S
        while (emulator.latest_checkpoint(runs_prefix) or 0) <= (result.lost_at_checkpoint or 0):
            job = google_restart.jobs_dir(google_restart.seen(vm), user) / attempt
            if (job / "exit").exists() or time.monotonic() > deadline:
                shutil.copyfile(job / "log", directory / f"{attempt}.log")
                raise RehearsalFailed(
                    f"{attempt}, begun by the recreated VM's start-up, made no later checkpoint (its log: "
                    f"{directory / f'{attempt}.log'})"
                )
            time.sleep(0.5)
        try:
            restarted = google_restart.restart(vm, user, lambda: emulator.latest_checkpoint(runs_prefix))
        except (RuntimeError, TimeoutError) as e:
            raise RehearsalFailed(f"Google's restart mid-training: {e}") from None
        result.boots.append(restarted.boot)
        result.restarts.append(restarted)
        say(
            f"Google restarted the VM after checkpoint {restarted.at_checkpoint} reached the bucket (boot "
            f"{restarted.boot.number}: same disks, empty /dev/shm, startup script again). The start-up: "
            f"{restarted.startup_line.strip()}"
        )

    def publish_without_vm(state: Stack, hub: HubDestination) -> None:
        say(
            "autostop sets the finished run's group to size 0 (its VM deleted, not repaired); the user adds "
            "tpu-sft:publishHubRepo, then `pulumi up`"
        )
        group.resize(0)
        vm.delete()
        result.boots_before_publish = len(result.boots)
        adds = {"tpu-sft:publishHubRepo": hub.repo, "tpu-sft:hfWriteToken": hub.token, "tpu-sft:evalGate": "off"}
        publishing, commands = record(
            CONFIG,
            {**overrides, **IN_A_GROUP, **adds},
            secret_keys=("tpu-sft:hfWriteToken",),
            remove=NO_RESERVATION,
            state=state,
            gone=(declared.name,),  # the group, at size 0, holds no VM
        )
        result.publish_declared = [r.type for r in publishing.resources]
        # This machine's own credentials: the project owner's view of the emulator; the Hub stand-in's endpoint.
        env = {**emulator.env, "HF_ENDPOINT": hub.endpoint}
        for command in commands:
            result.publish_up.append(execute_timestamped(command, env, result, out))

    user = recorded_target.user
    try:
        written = bucket_objects.upload_declared(stack, emulator)  # before any task: they depend on the objects
        result.data_objects = {o.name: len(o.data) for o in written}
        say(f"pulumi-gcp's objects, written into gs://{emulator.bucket} as the owner: {sorted(result.data_objects)}")
        result.boots.append(vm.create(image))
        result.vm_created_at = result.boots[-1].created_at
        say(f"VM {declared.name} created by its group at {address} (boot 1); its console: {result.boots[-1].console}")
        up(until_train, result.first_up)
        result.first_up.append(
            execute_timestamped(
                train, target_env(train, profile, address, directory), result, out, during=preempt_after_checkpoint
            )
        )
        if not result.recreations:
            raise RehearsalFailed("training ended before a checkpoint reached the bucket: the VM was never preempted")
        resumed = result.recreations[0].boot
        if resumed.attempt is None:
            raise RehearsalFailed(f"the recreated VM's start-up began no attempt: {resumed.startup_line.strip()}")
        restart_after_a_later_checkpoint(resumed.attempt)
        resumed.events = _events(google_restart.jobs_dir(google_restart.seen(vm), user) / resumed.attempt / "log")
        mid_run = result.restarts[0]
        try:
            keep_log = directory / f"boot-{mid_run.boot.number}-{mid_run.attempt}.log"
            google_restart.wait_for_attempt(vm, user, mid_run, keep_log)
        except (RuntimeError, TimeoutError) as e:
            raise RehearsalFailed(f"after Google's restart: {e}") from None
        say(f"{mid_run.attempt}, begun by the VM's start-up, ended with exit {mid_run.exit_code}")
        result.train_argv = _train_argv(vm)

        say("a further `pulumi up`: the same program and settings again, on the VM the group made")
        _remove(directory / "known_hosts")  # a new instance id: a new known_hosts file (substitution known-hosts)
        _, again = record(CONFIG, {**overrides, **IN_A_GROUP}, remove=NO_RESERVATION)
        result.second_up_inputs_unchanged = [(c.name, c.create, c.environment) for c in again] == [
            (c.name, c.create, c.environment) for c in commands
        ]
        say(
            f"  every command's inputs unchanged: {result.second_up_inputs_unchanged} (pulumi would run them for the "
            "new instance id only); running them, each must find its work done"
        )
        up(again, result.second_up)
        result.summary = last_json_line(result.second_up[-1].stdout)

        say("Google restarts the VM again, after the run finished")
        result.restarts.append(google_restart.restart(vm, user, lambda: emulator.latest_checkpoint(runs_prefix)))
        result.boots.append(result.restarts[-1].boot)
        say(f"boot {result.boots[-1].number}: {result.restarts[-1].startup_line.strip()}")

        say("Google preempts the VM again, after the run finished; the group recreates it on the same data disk")
        try:
            after_keep = group_repair.preempt(vm, group, image, user, lambda: emulator.latest_checkpoint(runs_prefix))
        except (RuntimeError, TimeoutError) as e:
            raise RehearsalFailed(f"the group's recreation after the run: {e}") from None
        result.recreations.append(after_keep)
        result.boots.append(after_keep.boot.boot)
        say(f"boot {after_keep.boot.boot.number}: {after_keep.boot.startup_line.strip()}")
        kept = Path(f"/proc/{vm.pid}/root{result.summary.get('kept_dir', '/nonexistent')}")
        result.kept_after_recreate = sorted(p.name for p in kept.iterdir()) if kept.is_dir() else []
        curve = kept / "metrics" / "train_steps.jsonl"
        if curve.is_file():
            result.kept_train_steps = [json.loads(line) for line in curve.read_text().splitlines()]
        if (kept / "manifest.json").is_file():
            result.kept_manifest = json.loads((kept / "manifest.json").read_text())
        say(
            f"boot {len(result.boots)}: the kept model {result.summary.get('kept_dir')} holds "
            f"{len(result.kept_after_recreate)} entries"
        )

        say("the next `pulumi up` on the new VM (a new instance id: every command runs again), the run finished")
        _remove(directory / "known_hosts")  # the new boot disk made new host keys
        result.kept_before = manifest(str(kept), hashes=True)
        finished_stack, finished_commands = record(CONFIG, {**overrides, **IN_A_GROUP}, remove=NO_RESERVATION)
        up(finished_commands, result.after_finished_up)
        result.kept_after = manifest(str(kept), hashes=True)
        say(f"  the kept model's {len(result.kept_after)} files unchanged: {result.kept_after == result.kept_before}")
        if publish is not None:
            publish_without_vm(left_by(finished_stack, result.after_finished_up), publish)
        result.bucket_objects = emulator.objects()
    except RehearsalFailed:
        _keep_vm_logs(vm, directory / "vm-logs")
        raise
    finally:
        vm.delete()
        cloud_storage.stop()
        result.storage_refusals = list(cloud_storage.refusals)
        _keep_refusals(cloud_storage, directory / "storage-refusals.log", say)
        address_lock.close()
        vm.wait_discarded()
        discard(directory / "boot-disks")
    result.finished_at = time.time()
    return result


def real_spec(bootstrap: Recorded) -> BootstrapSpec:
    """The spec `python -m remote phase bootstrap` would install on the VM with this command's environment."""
    target = PipelineTarget.from_json(bootstrap.environment[TARGET_ENV])
    return PhaseRequest.from_env("bootstrap", target, bootstrap.environment).bootstrap_spec()


def target_env(command: Recorded, profile: HostProfile, address: str, directory: Path) -> dict[str, str]:
    """The recorded target pointed at the simulated VM, with its profile; everything else as declared."""
    target = {
        **json.loads(command.environment[TARGET_ENV]),
        "host": address,
        "known_hosts": str(directory / "known_hosts"),
        "profile": profile.to_mapping(),
        "task_logs": None,  # every line on stdout, where this rehearsal reads the phases' progress
    }
    return {TARGET_ENV: json.dumps(target)}


def execute_timestamped(
    command: Recorded,
    env: dict[str, str],
    run: FreshVmRun,
    out: TextIO,
    *,
    during: Callable[[subprocess.Popen], None] | None = None,
) -> Executed:
    """Run one recorded command as pulumi-command does, each output line timestamped as it arrives. `during`
    watches the running command, on this thread: a VM it boots is killed when the thread that booted it ends
    (machine.py `killed_with_parent`: PR_SET_PDEATHSIG is the thread's). The command may then fail, as its VM went."""
    print(f"\n=== {command.name}: {command.create}", file=out, flush=True)
    started = time.monotonic()
    proc = start(command, env)
    captured: dict[str, list[str]] = {"stdout": [], "stderr": []}

    def pump(name: str, source) -> None:
        for text in source:
            at = time.time()
            captured[name].append(text)
            run.lines.append(Line(at, len(run.boots), command.name, name, text.rstrip("\n")))
            if run.first_train_step_at is None and name == "stdout" and text.startswith("train step "):
                run.first_train_step_at = at
            out.write(text)
            out.flush()

    pumps = [threading.Thread(target=pump, args=(n, s)) for n, s in (("stdout", proc.stdout), ("stderr", proc.stderr))]
    for t in pumps:
        t.start()
    if during:
        during(proc)
    for t in pumps:
        t.join()
    done = Executed(
        command.name, proc.wait(), "".join(captured["stdout"]), "".join(captured["stderr"]), time.monotonic() - started
    )
    if during is None and done.returncode != 0:
        raise RehearsalFailed(f"{command.name} failed (exit {done.returncode}); its output is above")
    return done


def _events(log: Path) -> list[dict]:
    """An attempt's progress events, from its job log (on the data disk, where a VM in a group keeps its jobs)."""
    lines = log.read_text(errors="replace").splitlines() if log.is_file() else []
    return [e for e in map(parse_event, lines) if e is not None]


def _train_argv(vm: FreshVm) -> list[str]:
    """The argv of the VM's last training, the first line of its log (workload/launch/proc.py: `$ ARGV`), read
    before /dev/shm goes with the VM."""
    logs = sorted(Path(f"/proc/{vm.pid}/root{SCRATCH_DIR}/logs").glob("train-*.log"))
    if not logs:
        return []
    with logs[-1].open() as log:
        return log.readline().removeprefix("$ ").split()


def _keep_vm_logs(vm: FreshVm, into: Path) -> None:
    """The workload's logs live in the VM's /dev/shm, which goes with it: keep them to read after a failure."""
    try:
        logs = Path(f"/proc/{vm.pid}/root{SCRATCH_DIR}/logs")
    except RuntimeError:
        return
    if logs.is_dir():
        discard(into)
        shutil.copytree(logs, into)


def _keep_refusals(storage: storage_iam.StorageIam, into: Path, say: Callable[[str], None]) -> None:
    """Every 403 the VM's clients got from Cloud Storage: a resume that dies on one names it here."""
    into.write_text("".join(f"{line}\n" for line in storage.refusals))
    if storage.refusals:
        say(f"Cloud Storage refused {len(storage.refusals)} request(s) of the VM (see {into}): {storage.refusals[0]}")


def _mkdir(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    return path


def _remove(path: Path) -> None:
    if path.is_dir():
        discard(path)
    else:
        path.unlink(missing_ok=True)
