"""The rehearsal's stand-in for the VM: a throwaway sshd on 127.0.0.1 that the current user logs in to.

It gets its own host key, user key and known_hosts in a private directory, a free port, and a bootstrap
that links the locally built MaxText venv instead of installing one from the internet (this machine
reaches only package registries, and the seed's bootstrap would upgrade this machine's own packages).
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
from remote.phase import BOOTSTRAP_SPEC_ENV, OUTPUT_DIR_ENV, WORK_DIR_ENV

REPO = Path(__file__).resolve().parent.parent
MAXTEXT_VENV = REPO / ".maxtext-venv"


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
        return {"tpu-sft:sshUser": self.user, "tpu-sft:sshPublicKeyPath": str(self.public_key_path)}

    def environment(self, recorded: Mapping[str, str], run_dir: Path) -> dict[str, str]:
        """What a recorded command's environment gets on top to run here: its target pointed at this sshd (the
        one thing that differs from a real VM), the local bootstrap, and scratch and data-disk folders."""
        target = {
            **json.loads(recorded["TPU_SFT_TARGET"]),
            "host": self.sshd.address,
            "port": self.sshd.port,
            "gateway": None,
            "known_hosts": str(self.directory / "known_hosts"),
            "trust_on_first_use": False,  # pinned at start: the rehearsal knows its host key
            "state_dir": str(self.state_dir),
        }
        return {
            "TPU_SFT_TARGET": json.dumps(target),
            BOOTSTRAP_SPEC_ENV: self._bootstrap_spec(),
            WORK_DIR_ENV: str(run_dir / "scratch"),
            OUTPUT_DIR_ENV: str(run_dir / "disk"),
        }

    def _bootstrap_spec(self) -> str:
        """Instead of seed step 3: the MaxText venv scripts/maxtext-venv built, linked where a VM has its own."""
        venv = f"{self.state_dir}/maxtext_venv"
        command = f"mkdir -p {shlex.quote(str(self.state_dir))} && ln -sfn {shlex.quote(str(MAXTEXT_VENV))} {shlex.quote(venv)}"
        return json.dumps({"steps": [{"name": "link-maxtext-venv", "command": command, "timeout_s": 60}], "env": {}})

    def stop(self) -> None:
        """Stop the sshd and delete its keys; the host's state (jobs, logs) stays for a re-run to find."""
        self.sshd.stop()
        for throwaway in (self.sshd.dir, self.sshd.user_key.private.parent, self.directory / "known_hosts"):
            if throwaway.is_dir():
                shutil.rmtree(throwaway)
            else:
                throwaway.unlink(missing_ok=True)
