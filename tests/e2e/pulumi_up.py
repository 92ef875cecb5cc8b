"""One `pulumi up`, for real: the post-deploy commands the program declares under the mock engine, executed in
order against a throwaway local sshd with the tiny profile, exactly as pulumi-command runs them. The user closes
the laptop right after convert starts: the convert command's whole process group is killed with SIGKILL and the
sshd listener stops, and the run goes on alone on the host to the kept model; then the user comes back and runs
the convert, train and export commands again (the same `pulumi up` again), which start nothing. Then every
command is run a second time (a `pulumi up` with nothing changed), and a third time on a new host with the same
data disk (the VM lost after the model was kept). The user's own commands (`scripts/tpu-sft status` and `logs`) ask
the stack about the run as it goes on alone, once it has finished, and once the host is gone. A recognisable fake HF
token is configured as a secret throughout, and every command line is sampled all along."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
from dataclasses import dataclass, field
from pathlib import Path

from rehearsal.engine import Stack
from rehearsal.local_host import LocalHost
from rehearsal.run import Executed, Recorded, start
from tests.procs import Watched
from tests.remote.stack_commands import tpu_sft
from tests.ssh_testbed import wait_until
from workload.core.contract import TARGET_ENV

TOKEN = "hf_LeakCanary" + "Zq7" * 10  # fake, and easy to find anywhere it should not be


class PsSampler(threading.Thread):
    """Every process's command line (what `ps -eo args` shows: /proc/PID/cmdline), sampled until stopped: where a
    secret on a command line would show. Read in-process, not by running ps five times a second. Keeps how many
    samples it took and the command lines that held `secret`."""

    def __init__(self, secret: str):
        super().__init__(daemon=True)
        self.secret = secret.encode()
        self.samples = 0
        self.holding_secret: list[str] = []
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.wait(0.2):
            for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
                try:
                    args = cmdline.read_bytes()
                except OSError:  # the process ended
                    continue
                if self.secret in args:
                    self.holding_secret.append(args.replace(b"\0", b" ").decode(errors="replace"))
            self.samples += 1

    def stop(self) -> None:
        self.halt.set()
        self.join()


@dataclass
class PulumiUp:
    host: LocalHost
    directory: Path
    stack: Stack
    commands: list[Recorded]
    first: dict[str, Executed] = field(default_factory=dict)  # convert, train and export: after the laptop came back
    closed_output: str = ""  # what the convert command printed before it was killed
    run_job: str = ""  # the run's job, which the run command started and that convert command followed
    run_exit: str = ""  # its exit code, read once it ended with nothing of the rehearsal left but the host
    manifests_when_the_run_ended: list[str] = field(default_factory=list)
    second: dict[str, Executed] = field(default_factory=dict)
    new_vm_host: LocalHost | None = None
    new_vm: dict[str, Executed] = field(default_factory=dict)  # every command again, on a new host
    # `scripts/tpu-sft VERB` against the stack: "status running" while the run went on alone, "status finished" and
    # "logs finished" and "fetch-model" (into directory/fetched) once it had ended, "status gone" after the host
    # stopped.
    asked: dict[str, subprocess.CompletedProcess] = field(default_factory=dict)
    ps_samples: int = 0
    command_lines_holding_token: list[str] = field(default_factory=list)

    def phase(self, name: str) -> str:
        return next(c.name for c in self.commands if c.name.endswith(f"-{name}"))

    def env(self, command: Recorded) -> dict[str, str]:
        return self.host.environment(command.environment, self.directory)

    def new_vm_env(self, command: Recorded) -> dict[str, str]:
        """The new host's target: its own sshd, state and scratch; the data disk of the first."""
        assert self.new_vm_host is not None, "start the new host first"
        env = self.new_vm_host.environment(command.environment, self.directory)
        target = json.loads(env[TARGET_ENV])
        target["profile"]["scratch_dir"] = str(self.new_vm_host.directory / "scratch")
        target["key_path"] = str(self.new_vm_host.sshd.user_key.private)  # the recording names the first host's
        return {TARGET_ENV: json.dumps(target)}

    def ask(self, name: str, *verb: str) -> None:
        """`scripts/tpu-sft VERB`, the `pulumi` CLI answering with the stack's outputs, its `target` the host's as the
        rehearsal substitutes it (any task's: they all get the same)."""
        target = self.env(self.commands[0])[TARGET_ENV]
        asking = self.directory / "asking"
        asking.mkdir(exist_ok=True)
        self.asked[name] = tpu_sft(asking, {**self.stack.outputs, "target": target}, *verb)

    def job_dirs(self) -> list[str]:
        return sorted(p.name for p in (self.host.state_dir / "jobs").iterdir() if not p.name.startswith("."))


def close_the_laptop_after_convert_starts(up: PulumiUp, command: Recorded) -> None:
    """Start the convert command as `pulumi up` would, in a process group of its own; once the run says convert
    started, SIGKILL the whole group and stop the host's sshd listener (its sessions too), as a laptop that sleeps
    takes its `pulumi up` and every connection with it. Then wait, starting nothing, for the run's job to end on the
    host (its exit file: the job's own handshake), and note whether the kept model's manifest was there then."""
    watched = Watched(proc := start(command, up.env(command), new_session=True))
    watched.read_until("▶ convert")
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    up.host.sshd.stop()
    up.run_job = next((line.split()[2] for line in watched.seen if line.startswith("convert: job ")), "")
    up.closed_output = watched.stdout + watched.stderr
    assert up.run_job and proc.returncode == -signal.SIGKILL, up.closed_output
    exit_file = up.host.state_dir / "jobs" / up.run_job / "exit"
    # The host answers again (every session it had is gone): the user asks where the run stands, from elsewhere.
    up.host.sshd.start()
    if not exit_file.exists():
        up.ask("status running", "status")
    wait_until(exit_file.exists, 3600, f"the run's job {up.run_job} to end on the host")
    up.run_exit = exit_file.read_text().strip()
    up.manifests_when_the_run_ended = sorted(str(p) for p in (up.directory / "disk").rglob("manifest.json"))
    up.ask("status finished", "status")
    up.ask("logs finished", "logs")
    up.ask("fetch-model", "fetch-model", str(up.directory / "fetched"))
