"""Secrets on the host: 0600 files under `<state_dir>/secrets/`, written over SFTP (never on a command line)."""

from __future__ import annotations

import shlex

from remote.ssh.connection import Connection, run
from remote.ssh.errors import RemoteError
from remote.ssh.hosts import on_every_host
from remote.ssh.target import Target
from remote.ssh.wait import wait_for_ssh


def secret_file(state_dir: str, name: str) -> str:
    """Where secret `name` lives under a host's state dir (also what a command that reads it is given)."""
    return f"{state_dir}/secrets/{name}"


def secret_path(conn: Connection, name: str) -> str:
    return secret_file(conn.target.state_dir, name)


def write_secret(conn: Connection, name: str, value: str) -> str:
    """Store `value` as `<state_dir>/secrets/<name>` (0600 from the first byte, replaced atomically)."""
    directory = f"{conn.target.state_dir}/secrets"
    run(conn, f"mkdir -p -- {shlex.quote(directory)} && chmod 700 -- {shlex.quote(directory)}")
    sftp = conn.sftp()
    # Named for the host: hosts that share a home (the rehearsal's and the tests' loopback hosts) each write
    # their own before the rename, and a rename never moves another host's half-written file.
    tmp = f"{directory}/.{name}.{conn.host}.tmp"
    with sftp.open(tmp, "w") as f:
        f.chmod(0o600)
        f.write(value.encode())
    sftp.posix_rename(tmp, secret_path(conn, name))
    return secret_path(conn, name)


def write_secret_everywhere(target: Target, name: str, value: str, deadline_s: float) -> dict[str, str | RemoteError]:
    """`write_secret` on every host of the target at once (each worker of a slice runs the job and reads its own
    copy), each host waited for up to `deadline_s` (a new slice's hosts answer SSH late, as a new VM does).
    Each host's path, or the error that stopped it there, in `target.hosts` order."""

    def one(host: str) -> str:
        with wait_for_ssh(target, deadline_s, host) as conn:
            return write_secret(conn, name, value)

    return on_every_host(target, one)


def place_secret(conn: Connection, name: str, value: str | None) -> bool:
    """Put `value` on the host if one was given here; either way, whether the host has the secret (placed now,
    or earlier by `put-secret`)."""
    if value:
        write_secret(conn, name, value)
        return True
    return run(conn, f"test -s {shlex.quote(secret_path(conn, name))} && echo yes || true").stdout.strip() == "yes"
