"""python -m rehearsal.slice: `pulumi up` on a multi-host slice, on this machine, with the tiny model.

  1. evaluates the real program under the Pulumi SDK's mock engine with the rehearsal stack set to a v6e-16
     slice (rehearsal/Pulumi.rehearsal.yaml plus SLICE_SETTINGS), and takes the post-deploy commands it
     declares: their targets list the slice's hosts by instance name, their profile the checkpoint bucket;
  2. starts HOSTS simulated hosts (rehearsal/slice_hosts.py: an sshd each, in its own namespaces, with its own
     home, hostname, address, /dev/shm and metadata server, whose tpu-env numbers the hosts in a shuffled order:
     the host the target lists first is not worker 0, `shuffled`) and gcp-storage-emulator as the checkpoint
     bucket, behind the IAM stand-in (rehearsal/storage_iam.py), which allows the hosts what the program
     granted their service account;
  3. runs the commands as pulumi-command would, each target pointed at those hosts: every phase's job starts
     on every host, MaxText trains as one JAX job across them (one CPU process per host, gloo), checkpoints go
     to the bucket, and worker 0 (by its tpu-env) alone exports, verifies and keeps the model in the bucket.

What stands in for what: the hosts are namespaces on this machine, not VMs; Cloud Storage is the emulator behind
the IAM stand-in, at the endpoint that stands for the hosts' service account (reached through each host's sshd
`SetEnv`, as a VM reaches the real API without any); MaxText runs on CPUs,
so the tiny profile takes any number of workers where a real v6e-16 has four. The program's target names four
hosts; the rehearsal replaces the hosts (and nothing else of the target but its keys, their instance ids and
bootstrap) with its own. Every run starts from new hosts and an empty bucket (the emulator keeps it in memory); it
leaves DIR/worker-N/home, each host's jobs and logs.

`--lora` trains a LoRA adapter across the hosts instead (tpu-sft:tuning lora, on Tunix's loop); worker 0 exports the
adapter and its merge into the base, and checks both against MaxText's logits (docs/tuning.md). `--qlora` does the
same on frozen weights quantised to nf4 (tpu-sft:tuning qlora).
"""

from __future__ import annotations

import dataclasses
import pwd
import shutil
import sys
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Any, Mapping, Sequence

from rehearsal import cli, gcs_emulator, storage_iam
from rehearsal.local_host import linked_venv_spec
from rehearsal.run import Executed, Recorded, execute, record, up
from rehearsal.slice_hosts import SliceHosts
from rehearsal.slice_restart import resume_step, run_resume_step
from rehearsal.sshd import make_user_key
from remote.pipeline.target import PipelineTarget
from workload.core.contract import EXIT_BAD_INPUT, TARGET_ENV

CONFIG = Path(__file__).resolve().parent / "Pulumi.rehearsal.yaml"
USER = "root"  # the login on every host (each host sees its own home)
# A slice refuses direct SSH (the program cannot know the hosts' addresses). Its autostop (declared, as the rehearsal
# stack leaves it on) runs at a host's boot, which simulated hosts do not have: tests/slice/test_slice_autostop.py.
SLICE_SETTINGS = {"tpu-sft:acceleratorType": "v6e-16", "tpu-sft:access": "iap"}
DEFAULT_HOSTS = 2
TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"


@dataclasses.dataclass
class SliceRehearsal:
    directory: Path
    hosts: SliceHosts
    emulator: gcs_emulator.GcsEmulator  # the bucket as its owner sees it (no IAM check)
    storage: storage_iam.StorageIam  # the bucket as the hosts reach it
    commands: list[Recorded]
    runs_prefix: str  # the checkpoints' prefix in the bucket
    settings: dict[str, str]  # the stack's config, over rehearsal/Pulumi.rehearsal.yaml
    outputs: dict[str, Any]  # the stack's, as `pulumi stack output` gives them (their `target` the program's)
    startup_script: str  # what the program declares a host runs at every boot (its instance template's)

    def with_settings(self, changed: dict[str, str]) -> SliceRehearsal:
        """The same slice and bucket after `pulumi config set` of `changed`: the program evaluated again, its commands
        recorded anew (the tasks whose inputs changed are the ones `pulumi up` would run)."""
        settings = {**self.settings, **changed}
        declared, commands = record(CONFIG, settings)
        return dataclasses.replace(self, commands=commands, settings=settings, outputs=declared.outputs)

    def command(self, phase: str) -> Recorded:
        return next(c for c in self.commands if c.name.endswith(f"-{phase}"))

    def environment(self, command: Recorded) -> dict[str, str]:
        """The recorded target, reaching this machine's hosts: their addresses in place order (the program's, by
        instance name; the worker order is their metadata's), their pinned keys
        (no instance ids: those name the program's hosts), no IAP gateway, and MaxText linked instead of installed
        (the rest of the profile is the program's)."""
        recorded = PipelineTarget.from_json(command.environment[TARGET_ENV])
        linked = linked_venv_spec(recorded.state_dir).to_mapping()
        target = dataclasses.replace(
            recorded,
            host=self.hosts.addresses[0],
            workers=self.hosts.addresses[1:],
            port=22,
            gateway=None,
            key_path=str(self.hosts.user_key.private),
            known_hosts=str(self.hosts.known_hosts),
            trust_on_first_use=False,
            host_ids=(),  # the program's, for its own hosts' names: these hosts' keys are pinned before any use
            profile=dataclasses.replace(recorded.profile, name="slice-rehearsal", bootstrap=linked),
            task_logs=None,  # every line on stdout, where the slice's tests read the phases' progress
        )
        return {TARGET_ENV: target.to_json()}

    def run(self, phase: str, *, echo: bool = True) -> Executed:
        command = self.command(phase)
        return execute(command, self.environment(command), echo=echo)

    def google_restart(self, wait_s: float, down: Sequence[int] = ()) -> dict[int, str]:
        """Google restarts the slice (rehearsal/slice_hosts.py `restart`; the workers in `down` do not come back) and
        each host that came back runs its start-up's resume step, its hosts waiting `wait_s` for each other: worker
        → the line the resumer printed."""
        self.hosts.restart(down)
        return {h.worker_id: self.start_up(h.worker_id, wait_s) for h in self.hosts.hosts if h.worker_id not in down}

    def start_up(self, worker_id: int, wait_s: float) -> str:
        """Worker `worker_id`'s start-up resume step (rehearsal/slice_restart.py), as its boot runs it."""
        step = resume_step(self.startup_script, f"/home/{USER}", pwd.getpwnam(USER).pw_dir, wait_s)
        return run_resume_step(self.hosts.by_worker_id(worker_id), step)


def shuffled(hosts: int) -> tuple[int, ...]:
    """The TPU worker id of the host at each place: every host's one place further on, so that no host is the
    worker its place would guess (the remote side must take the order from the metadata, not from the target)."""
    return tuple((place + 1) % hosts for place in range(hosts))


def start(
    directory: Path,
    stack: ExitStack,
    *,
    hosts: int = DEFAULT_HOSTS,
    steps: int | None = None,
    checkpoint_period: int | None = None,
    held_out: bool = True,
    settings: Mapping[str, str] | None = None,
) -> SliceRehearsal:
    """The bucket, the hosts and the recorded commands; `stack` stops the hosts and the bucket. `held_out=False`
    trains without the held-out passes (tpu-sft:evalInterval 0), as rehearsal/fresh_vm/rehearse.py says why.
    `settings`: stack settings over the slice's (cli.LORA for a LoRA run, cli.QLORA for QLoRA)."""
    directory.mkdir(parents=True, exist_ok=True)
    key = make_user_key(directory / "user-key")
    overrides = {
        **SLICE_SETTINGS,
        "tpu-sft:sshUser": USER,
        "tpu-sft:sshPublicKeyPath": f"{key.private}.pub",
        "tpu-sft:sshPublicKey": Path(f"{key.private}.pub").read_text().strip(),
        "tpu-sft:evalTasks": "off",  # the benchmarks are the local rehearsal's (python -m rehearsal)
    }
    if steps is not None:
        overrides["tpu-sft:steps"] = str(steps)
    if checkpoint_period is not None:
        overrides["tpu-sft:checkpointPeriod"] = str(checkpoint_period)
    if not held_out:
        overrides["tpu-sft:evalInterval"] = "0"
    overrides.update(settings or {})
    declared, commands = record(CONFIG, overrides)
    runs_url = PipelineTarget.from_json(commands[0].environment[TARGET_ENV]).profile.runs_dir or ""
    runs_prefix = runs_url.removeprefix("gs://").partition("/")[2]
    declared_storage = storage_iam.DeclaredStorage.of(declared)
    storage = storage_iam.start(declared_storage, directory / "storage-emulator.log")
    stack.callback(storage.stop)
    slice_hosts = stack.enter_context(
        SliceHosts(
            directory, hosts, USER, key, session_env=storage.env(declared_storage.host), worker_ids=shuffled(hosts)
        )
    )
    script = declared.one(TEMPLATE).inputs["metadata"]["startup-script"]
    return SliceRehearsal(
        directory, slice_hosts, storage.emulator, storage, commands, runs_prefix, overrides, declared.outputs, script
    )


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser("python -m rehearsal.slice", __doc__, "runs/slice-rehearsal")
    parser.add_argument("--hosts", type=int, default=DEFAULT_HOSTS, help=f"hosts (default {DEFAULT_HOSTS})")
    cli.add_tuning(parser)
    args = parser.parse_args(argv)
    if cli.no_maxtext_venv():
        return EXIT_BAD_INPUT
    if not 2 <= args.hosts <= 8:
        print(
            "error: --hosts must be 2 to 8 (each host is a MaxText process on this machine's CPUs). Fix: --hosts 2",
            file=sys.stderr,
        )
        return EXIT_BAD_INPUT
    started = time.monotonic()
    directory = args.dir.resolve()
    if directory.exists() and any(directory.iterdir()):
        if not (directory / "known_hosts").exists():
            print(
                f"error: {directory} holds something else than a slice rehearsal. Fix: give a new or empty --dir",
                file=sys.stderr,
            )
            return EXIT_BAD_INPUT
        shutil.rmtree(directory)  # the bucket of the previous run is gone: so go its hosts' jobs
    with ExitStack() as stack:
        rehearsal = start(directory, stack, hosts=args.hosts, settings=cli.tuning_settings(args) or None)
        summary = up(rehearsal.commands, rehearsal.environment, "slice rehearsal")
        if summary is None:
            for refused in rehearsal.storage.refusals:  # a 403 is often the cause a host's log buries
                print(f"Cloud Storage refused: {refused}", file=sys.stderr)
            return 1
        kept = sorted(n for n in rehearsal.emulator.objects("kept/") if n.endswith("/manifest.json"))
    print(f"\nslice rehearsal done in {time.monotonic() - started:.0f} s on {args.hosts} hosts")
    print(f"  final step {summary.get('final_step')}, loss {summary.get('final_loss')}; kept: {', '.join(kept)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
