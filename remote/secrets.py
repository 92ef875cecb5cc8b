"""Secrets on the host: 0600 files under `<state_dir>/secrets/`, written over SFTP (never on a command line)."""

from __future__ import annotations

import shlex

from remote.connection import Connection, run


def secret_path(conn: Connection, name: str) -> str:
    return f"{conn.target.state_dir}/secrets/{name}"


def write_secret(conn: Connection, name: str, value: str) -> str:
    """Store `value` as `<state_dir>/secrets/<name>` (0600 from the first byte, replaced atomically)."""
    directory = f"{conn.target.state_dir}/secrets"
    run(conn, f"mkdir -p -- {shlex.quote(directory)} && chmod 700 -- {shlex.quote(directory)}")
    sftp = conn.sftp()
    tmp = f"{directory}/.{name}.tmp"
    with sftp.open(tmp, "w") as f:
        f.chmod(0o600)
        f.write(value.encode())
    sftp.posix_rename(tmp, secret_path(conn, name))
    return secret_path(conn, name)


def place_secret(conn: Connection, name: str, value: str | None) -> bool:
    """Put `value` on the host if one was given here; either way, whether the host has the secret (placed now,
    or earlier by `put-secret`)."""
    if value:
        write_secret(conn, name, value)
        return True
    return run(conn, f"test -s {shlex.quote(secret_path(conn, name))} && echo yes || true").stdout.strip() == "yes"
