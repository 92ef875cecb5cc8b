"""The rehearsal's stand-in for the VM: a throwaway sshd on 127.0.0.1 that the current user logs in to.

It gets its own host key, user key and known_hosts in a private directory, a free port, and its own host
profile (remote/pipeline/profile.py): a bootstrap that links the locally built MaxText venv instead of installing one
from the internet (this machine reaches only package registries, and the seed's bootstrap would upgrade this
machine's own packages), scratch and "data disk" folders under the run directory, and no mount to wait for.
"""

from __future__ import annotations

import getpass
import json
import shlex
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from rehearsal.sshd import Sshd, make_user_key
from remote.pipeline.bootstrap import seed
from remote.pipeline.bootstrap.spec import BootstrapSpec, Step
from remote.pipeline.profile import HostProfile
from workload.core.contract import TARGET_ENV

REPO = Path(__file__).resolve().parent.parent
MAXTEXT_VENV = REPO / ".maxtext-venv"
EVAL_VENV = REPO / ".eval-venv"  # scripts/eval-venv


@dataclass
class LocalHost:
    sshd: Sshd
    directory: Path
    state_dir: Path

    @classmethod
    def start(cls, directory: Path) -> "LocalHost":
        directory.mkdir(parents=True, exist_ok=True)
        key = make_user_key(directory / "user-key")
        sshd = Sshd(directory / "sshd", key).start()
        known_hosts = directory / "known_hosts"
        known_hosts.write_text(sshd.known_hosts_line)
        return cls(sshd, directory, directory / "host")

    @property
    def user(self) -> str:
        return getpass.getuser()

    @property
    def public_key_path(self) -> Path:
        return Path(f"{self.sshd.user_key.private}.pub")

    def config_overrides(self) -> dict[str, str]:
        """Stack settings that make the program's commands log in to this host, as the current user."""
        return {
            "tpu-sft:sshUser": self.user,
            "tpu-sft:sshPublicKeyPath": str(self.public_key_path),
            "tpu-sft:sshPublicKey": self.public_key_path.read_text().strip(),
        }

    def environment(
        self, recorded: Mapping[str, str], run_dir: Path, *, task_logs: Path | None = None
    ) -> dict[str, str]:
        """What a recorded command's environment gets on top to run here: its target pointed at this sshd, with
        this host's profile in place of the VM's; each phase's whole log in `task_logs` as `pulumi up` keeps it
        (remote/pipeline/task_log.py), or with None every line on stdout, where the tests read the progress."""
        target = {
            **json.loads(recorded[TARGET_ENV]),
            "host": self.sshd.address,
            "port": self.sshd.port,
            "gateway": None,
            "known_hosts": str(self.directory / "known_hosts"),
            "trust_on_first_use": False,  # pinned at start: the rehearsal knows its host key
            "state_dir": str(self.state_dir),
            "profile": self.profile(run_dir).to_mapping(),
            "task_logs": None if task_logs is None else str(task_logs),
        }
        return {TARGET_ENV: json.dumps(target)}

    def profile(self, run_dir: Path) -> HostProfile:
        return HostProfile(
            name="local",
            scratch_dir=str(run_dir / "scratch"),
            kept_dir=str(run_dir / "disk"),
            required_mount=None,
            bootstrap=linked_venv_spec(str(self.state_dir)).to_mapping(),
        )

    def stop(self) -> None:
        """Stop the sshd and delete its keys; the host's state (jobs, logs) stays for a re-run to find."""
        self.sshd.stop()
        for throwaway in (self.sshd.dir, self.sshd.user_key.private.parent, self.directory / "known_hosts"):
            if throwaway.is_dir():
                shutil.rmtree(throwaway)
            else:
                throwaway.unlink(missing_ok=True)


def linked_venv_spec(state_dir: str) -> BootstrapSpec:
    """Instead of seed step 3: the MaxText venv scripts/maxtext-venv built and the eval venv scripts/eval-venv built
    (lm-eval over the MaxText venv's packages; no vLLM: the tiny model is served by workload/eval/chat_server.py),
    linked where a VM has its own (`state_dir` as the target gives it: absolute, or relative to the login's home)."""
    links = [(MAXTEXT_VENV, f"{state_dir}/maxtext_venv"), (EVAL_VENV, f"{state_dir}/{seed.EVAL_VENV}")]
    command = f"mkdir -p {shlex.quote(state_dir)}" + "".join(
        f" && ln -sfn {shlex.quote(str(source))} {shlex.quote(link)}" for source, link in links
    )
    return BootstrapSpec((Step("link-maxtext-venv", command, 60),))
