"""A VM that `pulumi up` has just created: sshd answers late, the login user (and its authorised key) appears
later still, and the host key made at first boot may replace the one sshd answered with at first.

Every verb the Pulumi program runs first (put-secret, bootstrap, phase) waits for all of that; a host key is
recorded only once the login was accepted, and a key that changes after that is still refused."""

import os
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest

from remote.ssh.errors import HostKeyError
from remote.ssh.target import Target
from remote.ssh.wait import wait_for_ssh
from tests.ssh_testbed import Sshd, keygen, make_user_key, wait_until

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def late_user_key(testbed):
    """A user key whose authorised-keys file starts empty: the guest agent has not created the user yet."""
    key = make_user_key(Path(tempfile.mkdtemp(prefix="late-user-", dir=testbed)))
    key.private.parent.chmod(0o755)
    key.authorized_keys.write_text("")
    key.authorized_keys.chmod(0o644)
    return key


@pytest.fixture
def booting_host(tmp_path, late_user_key):
    sshd = Sshd(tmp_path / "booting-sshd", late_user_key)
    yield sshd
    sshd.stop()


def _target(sshd, state_dir, known_hosts, **overrides):
    return Target(
        host=sshd.address,
        port=sshd.port,
        user="tpusft-test",
        key_path=str(sshd.user_key.private),
        known_hosts=str(known_hosts),
        state_dir=str(state_dir),
        connect_timeout=1.0,
        command_timeout=10.0,
        trust_on_first_use=True,
        **overrides,
    )


def _authorise(key) -> None:
    key.authorized_keys.write_text(Path(f"{key.private}.pub").read_text())


def test_host_key_is_recorded_only_after_the_login_is_accepted(booting_host, scratch, tmp_path):
    known = tmp_path / "known_hosts"
    booting_host.start()  # first boot: the image's host key, and no user yet
    first_key_line = booting_host.known_hosts_line
    target = _target(booting_host, scratch / "state", known)
    outcome = {}

    def waiter():
        try:
            with wait_for_ssh(target, deadline_s=300, first_backoff_s=0.1, max_backoff_s=0.3) as conn:
                outcome["user"] = conn.run("id -un", hide=True, in_stream=False).stdout.strip()
        except Exception as e:  # handed to the test thread
            outcome["error"] = e

    thread = threading.Thread(target=waiter, daemon=True)
    thread.start()
    wait_until(
        lambda: booting_host.log_text().count("Connection closed by authenticating user") >= 2,
        what="the login to be refused (no authorised key yet)",
    )
    assert not known.exists() or known.read_text() == ""  # a refused login records nothing
    # The guest agent runs: new host keys, the user and its key. sshd restarts on the same port.
    booting_host.stop()
    keygen(booting_host.host_key)
    _authorise(booting_host.user_key)
    booting_host.start()  # from this thread: sshd dies with the thread that started it
    thread.join(300)  # a bound for a failed wait only: the login answers as soon as sshd does
    assert "error" not in outcome, outcome.get("error")
    assert outcome["user"] == "tpusft-test"
    recorded = known.read_text()
    assert recorded == booting_host.known_hosts_line and recorded != first_key_line

    # Once recorded, a key that changes is refused, trust-on-first-use or not, and not retried.
    booting_host.stop()
    keygen(booting_host.host_key)
    booting_host.start()
    with pytest.raises(HostKeyError, match="CHANGED"):
        wait_for_ssh(target, deadline_s=120, first_backoff_s=0.1)  # a changed key ends the wait at once
    assert known.read_text() == recorded


def _cli_in_background(args, target, stdin: str = "") -> subprocess.Popen:
    env = {**os.environ, "TPU_SFT_TARGET": target.to_json()}
    with tempfile.TemporaryFile("w+") as given:
        given.write(stdin)
        given.seek(0)
        return subprocess.Popen(
            [sys.executable, "-m", "remote", *args],
            stdin=given,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=env,
        )


@pytest.mark.parametrize("verb", ["put-secret", "bootstrap"])
def test_first_contact_verbs_wait_for_a_late_sshd_and_a_late_user(verb, booting_host, scratch, tmp_path):
    """What `pulumi up` runs right after creating the VM: it must wait, not fail on the first refusal."""
    booting_host.start()
    booting_host.stop()  # keeps its port: nothing listens there yet
    target = _target(booting_host, scratch / "state", tmp_path / "known_hosts")
    if verb == "put-secret":
        proc = _cli_in_background(["put-secret", "hf_token"], target, stdin="hf_FAKElate0123456789")
    else:
        spec = tmp_path / "spec.json"
        spec.write_text('{"steps": [{"name": "mark", "command": "echo installed > ' + str(scratch) + '/mark"}]}')
        proc = _cli_in_background(["bootstrap", "--spec", str(spec)], target)
    # The verb meets a closed port for a while, then an sshd that refuses the user, then the user.
    time.sleep(1.0)
    assert proc.poll() is None, proc.communicate()
    booting_host.start()
    wait_until(
        lambda: "Connection closed by authenticating user" in booting_host.log_text() or proc.poll() is not None,
        what="a refused login",
    )
    _authorise(booting_host.user_key)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert "waiting for SSH" in err
    if verb == "put-secret":
        assert (Path(target.state_dir) / "secrets/hf_token").read_text() == "hf_FAKElate0123456789"
    else:
        assert (scratch / "mark").read_text() == "installed\n"
