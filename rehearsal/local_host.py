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

from rehearsal.sshd import Sshd, make_user_key

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

    def target(self, recorded: dict) -> dict:
        """The recorded target, pointed at this sshd: the one thing that differs from a real VM."""
        return {
            **recorded,
            "host": self.sshd.address,
            "port": self.sshd.port,
            "gateway": None,
            "known_hosts": str(self.directory / "known_hosts"),
            "trust_on_first_use": False,  # pinned above: the rehearsal knows its host key
            "state_dir": str(self.state_dir),
        }

    def bootstrap_spec(self) -> str:
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
