"""One `pulumi up`, for real: the post-deploy commands the program declares under the mock engine, executed in
order against a throwaway local sshd with the tiny profile, exactly as pulumi-command runs them. The train
phase's follower is killed mid-run and the same command run again (an interrupted `pulumi up`); then every
command is run a second time (a `pulumi up` with nothing changed), and a third time on a new host with the same
data disk (the VM lost after the model was kept). A recognisable fake HF token is configured
as a secret throughout, and every command line is sampled all along."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from pathlib import Path

from rehearsal.engine import Stack
from rehearsal.local_host import LocalHost
from rehearsal.run import Executed, Recorded, start
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
    first: dict[str, Executed] = field(default_factory=dict)
    interrupted_output: str = ""
    train_job_before_kill: str = ""
    second: dict[str, Executed] = field(default_factory=dict)
    new_vm_host: LocalHost | None = None
    new_vm: dict[str, Executed] = field(default_factory=dict)  # every command again, on a new host
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

    def job_dirs(self) -> list[str]:
        return sorted(p.name for p in (self.host.state_dir / "jobs").iterdir() if not p.name.startswith("."))


def kill_follower_mid_training(up: PulumiUp, command: Recorded) -> None:
    """Start the train command, and SIGKILL it (Ctrl-C, a laptop asleep) once training reports a step."""
    proc = start(command, up.env(command))
    assert proc.stdout is not None and proc.stderr is not None
    stderr = proc.stderr
    drained: list[str] = []
    threading.Thread(target=lambda: drained.extend(stderr), daemon=True).start()
    seen = []
    for line in proc.stdout:
        seen.append(line)
        if line.startswith("train: job "):
            up.train_job_before_kill = line.split()[2]
        if line.startswith("train step "):
            proc.kill()
            break
    proc.wait()
    up.interrupted_output = "".join(seen) + "".join(drained)
    assert up.train_job_before_kill, up.interrupted_output
