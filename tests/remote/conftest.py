"""Fixtures: real sshd servers on loopback (one main host, a three-host cluster, private ones to break).

The remote user is a dedicated unprivileged account whose login shell is /bin/sh, created if absent: like the
VM's user it is not root, and it keeps this machine's root shell start-up files (pyenv, 0.15 s per command)
out of every round trip. What it writes lives under one scratch directory it owns, removed at the end.
"""

from __future__ import annotations

import os
import pwd
import shutil
import tempfile
from pathlib import Path
from typing import Any

import paramiko
import pytest

from remote.target import Target
from tests.remote.ssh_testbed import REMOTE_USER, Sshd, TcpProxy, ensure_remote_user, free_port, make_user_key

FAST = dict(connect_timeout=3.0, command_timeout=10.0)


class Host:
    """A running sshd and how to reach it: `target()` gives a Target with its key pinned."""

    def __init__(self, sshd: Sshd, known_hosts: Path):
        self.sshd, self.known_hosts = sshd, known_hosts

    def pin(self) -> None:
        with open(self.known_hosts, "a") as f:
            f.write(self.sshd.known_hosts_line)

    def target(self, state_dir: Path, **overrides) -> Target:
        fields: dict[str, Any] = dict(
            host=self.sshd.address, port=self.sshd.port, user=REMOTE_USER, key_path=str(self.sshd.user_key.private),
            known_hosts=str(self.known_hosts), state_dir=str(state_dir), **FAST,
        )
        fields.update(overrides)
        return Target(**fields)


@pytest.fixture(scope="session")
def remote_user() -> pwd.struct_passwd:
    return ensure_remote_user()


@pytest.fixture(scope="session")
def testbed(remote_user):
    """A directory the remote user can reach (pytest's own tmp dirs are root-only)."""
    base = Path(tempfile.mkdtemp(prefix="tpu-sft-remote-tests-"))
    base.chmod(0o755)
    yield base
    shutil.rmtree(base, ignore_errors=True)


@pytest.fixture(scope="session")
def user_key(testbed):
    key = make_user_key(testbed / "user-key")
    (testbed / "user-key").chmod(0o755)
    key.authorized_keys.chmod(0o644)  # sshd reads it as the remote user
    return key


@pytest.fixture
def scratch(testbed, remote_user, request) -> Path:
    """This test's directory, owned by the remote user: its jobs write here, the test reads here."""
    path = Path(tempfile.mkdtemp(prefix=request.node.name[:40] + "-", dir=testbed))
    os.chown(path, remote_user.pw_uid, remote_user.pw_gid)
    return path


@pytest.fixture(scope="session")
def sshd_host(tmp_path_factory, user_key):
    directory = tmp_path_factory.mktemp("sshd-main")
    host = Host(Sshd(directory / "server", user_key).start(), directory / "known_hosts")
    host.pin()
    yield host
    host.sshd.stop()


@pytest.fixture
def state_dir(scratch) -> Path:
    """The host-side state directory for one test (the hosts are this machine)."""
    return scratch / "remote state"  # a space on purpose: every path must be quoted


@pytest.fixture
def target(sshd_host, state_dir) -> Target:
    return sshd_host.target(state_dir)


class Cluster:
    """Three hosts on 127.0.0.2–4 on one port (a Target's workers share its port), each its own sshd and host
    key, all pinned in one known_hosts."""

    def __init__(self, directory: Path, user_key):
        self.known_hosts = directory / "known_hosts"
        for _ in range(10):
            port = free_port("127.0.0.2")
            self.hosts = [Host(Sshd(directory / f"h{i}", user_key, f"127.0.0.{i}"), self.known_hosts)
                          for i in (2, 3, 4)]
            try:
                for host in self.hosts:
                    host.sshd.start(port)
                break
            except RuntimeError:  # the port was taken on another address: try another
                self.stop()
        else:
            raise RuntimeError(f"could not start a three-host cluster; see {directory}")
        for host in self.hosts:
            host.pin()

    def target(self, state_dir: Path, **overrides) -> Target:
        return self.hosts[0].target(state_dir, workers=("127.0.0.3", "127.0.0.4"), **overrides)

    def stop(self) -> None:
        for host in self.hosts:
            host.sshd.stop()


@pytest.fixture(scope="session")
def cluster(tmp_path_factory, user_key):
    cluster = Cluster(tmp_path_factory.mktemp("sshd-cluster"), user_key)
    yield cluster
    cluster.stop()


@pytest.fixture
def private_host(tmp_path, user_key):
    """A host of this test's own, free to stop, restart or cut off."""
    host = Host(Sshd(tmp_path / "private-sshd", user_key).start(), tmp_path / "private_known_hosts")
    host.pin()
    yield host
    host.sshd.stop()


@pytest.fixture
def make_proxy():
    proxies = []

    def make(upstream: tuple[str, int], address: str = "127.0.0.1", port: int = 0) -> TcpProxy:
        proxies.append(TcpProxy(upstream, address, port))
        return proxies[-1]

    yield make
    for proxy in proxies:
        proxy.close()



@pytest.fixture
def channels(monkeypatch):
    """Counts SSH channels opened per server address: each is one round trip (a command or an SFTP session)."""
    counts: dict[str, int] = {}
    original = paramiko.Transport.open_session

    def counting(self, *args, **kwargs):
        host = self.getpeername()[0]
        counts[host] = counts.get(host, 0) + 1
        return original(self, *args, **kwargs)

    monkeypatch.setattr(paramiko.Transport, "open_session", counting)
    return counts

