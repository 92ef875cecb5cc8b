"""`put-secret` (the `…-hf-token` task) places the token on every host of a slice: each worker runs the job and
reads its own copy. Two real sshd on 127.0.0.2 and 127.0.0.3 (a target's workers share its port), each with its
own sftp-server log, so that each server's log shows the 0600 write and the rename it received (the two "hosts"
share this machine's disk: the file alone cannot say that both were written)."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from remote.ssh.errors import EXIT_SOME_HOSTS_FAILED
from tests.fixtures.sshd import FAST, Host
from tests.ssh_testbed import Sshd, free_port

REPO = Path(__file__).resolve().parents[3]
TOKEN = "hf_FAKEeveryHOST0123456789abcdefXYZ"


@pytest.fixture
def two_hosts(tmp_path, user_key, scratch):
    for _ in range(10):
        port = free_port("127.0.0.2")
        hosts = [
            Host(
                Sshd(tmp_path / f"h{i}", user_key, f"127.0.0.{i}", sftp_log=scratch / f"sftp-{i}.log"),
                tmp_path / "known_hosts",
            )
            for i in (2, 3)
        ]
        try:
            for host in hosts:
                host.sshd.start(port)
            break
        except RuntimeError:  # the port was taken on the other address: try another
            for host in hosts:
                host.sshd.stop()
    else:
        raise RuntimeError(f"could not start two hosts on one port; see {tmp_path}")
    for host in hosts:
        host.pin()
    yield hosts
    for host in hosts:
        host.sshd.stop()


def put_secret(target, deadline_s: int = 120) -> subprocess.CompletedProcess:
    """The verb as a task runs it; hosts that answer end the wait at once, so only an unreachable one meets
    `deadline_s`, and the default is far beyond what a loaded machine takes to connect."""
    env = {**os.environ, "TPU_SFT_TARGET": target.to_json()}
    env.pop("HF_TOKEN", None)
    return subprocess.run(
        [sys.executable, "-m", "remote", "put-secret", "hf_token", "--deadline", str(deadline_s)],
        input=TOKEN,
        text=True,
        capture_output=True,
        cwd=REPO,
        env=env,
        timeout=300,
    )


def test_the_token_reaches_every_host_over_its_own_sftp(two_hosts, scratch):
    main, worker = two_hosts
    target = main.target(scratch / "state", workers=(worker.sshd.address,))
    stored = put_secret(target)
    assert stored.returncode == 0, stored.stderr
    secrets = scratch / "state/secrets"
    assert stored.stdout.splitlines() == [
        f"stored hf_token on 127.0.0.2 at {secrets}/hf_token (mode 0600)",
        f"stored hf_token on 127.0.0.3 at {secrets}/hf_token (mode 0600)",
    ]
    for host in two_hosts:  # each server received its own write: the file made 0600, the bytes, the rename
        log = host.sshd.sftp_log.read_text()
        tmp = f"{secrets}/.hf_token.{host.sshd.address}.tmp"
        assert [line for line in log.splitlines() if tmp in line] == [
            f'open "{tmp}" flags WRITE,CREATE,TRUNCATE mode 0666',
            f'set "{tmp}" mode 0600',  # before any byte (tests/remote/ssh/test_secrets.py checks that order)
            f'close "{tmp}" bytes read 0 written {len(TOKEN)}',
            f'posix-rename old "{tmp}" new "{secrets}/hf_token"',
        ], host.sshd.address
        assert TOKEN not in log + host.sshd.log_text()
    assert TOKEN not in stored.stdout + stored.stderr
    assert (secrets / "hf_token").read_text() == TOKEN  # the hosts share this machine's disk: one file
    assert oct((secrets / "hf_token").stat().st_mode & 0o777) == "0o600"


def test_a_worker_that_cannot_be_reached_is_named_and_the_others_still_get_it(two_hosts, scratch):
    main, worker = two_hosts
    worker.sshd.stop()
    target = main.target(scratch / "state", workers=(worker.sshd.address,), **{**FAST, "connect_timeout": 1.0})
    stored = put_secret(target, deadline_s=5)
    assert stored.returncode == EXIT_SOME_HOSTS_FAILED
    assert stored.stdout == f"stored hf_token on 127.0.0.2 at {scratch}/state/secrets/hf_token (mode 0600)\n"
    assert "error: 127.0.0.3: no SSH answer within 5 s" in stored.stderr
    assert TOKEN not in stored.stdout + stored.stderr
