"""One SSH identity per stack: the VM's key comes from stack config, so the same stack previews the same from
any machine; an update checks that the machine running it holds the private half (present, no passphrase,
matching). The private key is never an input, an output or a command-line argument."""

import subprocess

import pytest
from pulumi import RunError

from infra.config.stack_file import read_stack_config
from rehearsal.engine import run_program
from tests.fixtures.mock_engine import DEV_STACK

INSTANCE = "gcp:compute/instance:Instance"


def _machine(tmp_path, name: str, *, passphrase: str = ""):
    """A home with its own `gcloud compute ssh` key pair, as on a laptop or a fresh CI runner."""
    home = tmp_path / name
    (home / ".ssh").mkdir(parents=True)
    subprocess.run(
        [
            "ssh-keygen",
            "-q",
            "-t",
            "ed25519",
            "-N",
            passphrase,
            "-C",
            name,
            "-f",
            str(home / ".ssh/google_compute_engine"),
        ],
        check=True,
    )
    return home


@pytest.mark.parametrize("stack_file", ["as shipped", "without tpu-sft:sshPublicKey"])
def test_two_machines_preview_the_same(tmp_path, monkeypatch, stack_file):
    """Whatever key files a laptop or a fresh CI runner holds, the stack declares the same VM (or stops with
    the same error): no machine can show or apply a change to the VM's key that nobody made."""
    config = read_stack_config(DEV_STACK)
    if stack_file != "as shipped":
        del config["tpu-sft:sshPublicKey"]
    outcomes = []
    for name in ("laptop", "ci-runner"):
        monkeypatch.setenv("HOME", str(_machine(tmp_path, name)))
        try:
            outcomes.append(run_program(config).one(INSTANCE).inputs)
        except RunError as e:
            outcomes.append(str(e))
    assert outcomes[0] == outcomes[1]
    if stack_file == "as shipped":
        assert outcomes[0]["metadata"]["ssh-keys"] == f"tpu-sft:{config['tpu-sft:sshPublicKey']}"
    else:
        assert outcomes[0].startswith("tpu-sft:sshPublicKey: is not set")


def test_a_preview_reads_no_key_file(tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", str(tmp_path / "no-keys-here"))
    assert run_program(read_stack_config(DEV_STACK)).one(INSTANCE)  # a CI runner with no ~/.ssh at all


def _update(config, home, monkeypatch):
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.setenv("HF_TOKEN", "hf_FAKEupdateToken0123456789")
    return run_program(config, preview=False)


def test_an_update_with_the_stacks_private_key_goes_ahead(dev_config, gcloud_home, monkeypatch):
    assert _update(dev_config, gcloud_home, monkeypatch).of_type(INSTANCE)


@pytest.mark.parametrize(
    ("case", "key", "says"),
    [
        ("another machine's key", "tpu-sft:sshPublicKey", "is not the public half of"),
        ("no key file", "tpu-sft:sshPublicKeyPath", "does not exist"),
        ("a passphrase", "tpu-sft:sshPublicKeyPath", "protected by a passphrase"),
    ],
)
def test_an_update_without_the_private_half_stops_before_anything(dev_config, tmp_path, monkeypatch, case, key, says):
    if case == "another machine's key":
        home = _machine(tmp_path, "teammate")
    elif case == "no key file":
        home = tmp_path / "empty"
    else:
        home = _machine(tmp_path, "locked", passphrase="secret words")
        public_key = (home / ".ssh/google_compute_engine.pub").read_text().strip()
        dev_config = {**dev_config, "tpu-sft:sshPublicKey": public_key}
    with pytest.raises(RunError) as stopped:
        _update(dev_config, home, monkeypatch)
    message = str(stopped.value)
    assert message.startswith(f"{key}:") and says in message and "Fix:" in message and "\n" not in message
