import subprocess
from pathlib import Path

import pytest

from infra.stack_file import read_stack_config
from rehearsal.engine import ROOT, run_program

DEV_STACK = ROOT / "Pulumi.dev.yaml"


@pytest.fixture(scope="session")
def gcloud_home(tmp_path_factory) -> Path:
    """A home directory holding the key pair `gcloud compute ssh` would have made."""
    home = tmp_path_factory.mktemp("home")
    (home / ".ssh").mkdir()
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "me@laptop", "-f",
         str(home / ".ssh/google_compute_engine")],
        check=True,
    )
    return home


@pytest.fixture(autouse=True)
def _home(gcloud_home, monkeypatch):
    monkeypatch.setenv("HOME", str(gcloud_home))


@pytest.fixture
def dev_config(gcloud_home) -> dict[str, str]:
    """The shipped dev stack, with its SSH public key set to this home's own, as a user does."""
    public_key = (gcloud_home / ".ssh/google_compute_engine.pub").read_text().strip()
    return {**read_stack_config(DEV_STACK), "tpu-sft:sshPublicKey": public_key}


@pytest.fixture
def mock_stack(dev_config):
    """Runs `__main__.py` under the mock engine with the dev stack plus overrides; returns what it declared."""

    def run(overrides: dict[str, str] | None = None, *, remove: tuple[str, ...] = (), secret_keys: tuple[str,
                                                                                                         ...] = ()):
        config = {k: v for k, v in {**dev_config, **(overrides or {})}.items() if k not in remove}
        return run_program(config, secret_keys=secret_keys)

    return run
