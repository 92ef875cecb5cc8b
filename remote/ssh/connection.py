"""Fabric connections with every safety setting explicit: pinned host keys, timeouts, keepalive.

Fabric's defaults are unsafe for unattended use: it accepts any host key, reads
~/.ssh/config, lets a dead link hang for an hour and pastes `env=` values unquoted. Everything here is set
at construction, and `run` is the one way the rest of the package executes a command.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import shlex
import socket
import time
from typing import Mapping, TextIO

import fabric
import paramiko
from invoke.exceptions import CommandTimedOut, ThreadException, UnexpectedExit

from remote.ssh.errors import AuthError, BadInput, CommandFailed, HostKeyError, TargetError, Unreachable, describe
from remote.ssh.gateway import GatewayProcess
from remote.ssh.host_ids import forget_if_rebuilt
from remote.ssh.target import Target

log = logging.getLogger("remote")

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# What a broken or unresponsive link raises from paramiko and the socket layer.
NETWORK_ERRORS = (OSError, EOFError, paramiko.SSHException, socket.timeout)
OUTPUT_TAIL_LINES = 20  # of a failed command's output, kept in its CommandFailed


class _QuietlyKilledRemote(fabric.runners.Remote):
    """Invoke's timeout thread kills a command by closing its channel; when our side has meanwhile closed the
    connection (the timeout already reported), that close fails in the timer thread, and Python prints the
    traceback to stderr. The channel is gone, which is all `kill` wanted."""

    def kill(self) -> None:
        try:
            super().kill()
        except NETWORK_ERRORS:
            pass


class Connection(fabric.Connection):
    """A `fabric.Connection` bound to a `Target`: opens pinned, times out, keeps alive."""

    def __init__(self, target: Target, host: str):
        config = fabric.Config(
            lazy=True,  # no /etc/fabric.yml, ~/.fabric.yml or ssh_config: nothing inherited silently
            overrides={
                "load_ssh_configs": False,
                "run": {"in_stream": False, "hide": True},
                "runners": {"remote": _QuietlyKilledRemote},
                "timeouts": {"command": target.command_timeout},
            },
        )
        super().__init__(
            host,
            user=target.user,
            port=target.port,
            config=config,
            gateway=target.gateway or False,
            forward_agent=False,
            connect_kwargs={
                "key_filename": [target.key_path],
                "look_for_keys": False,
                "allow_agent": False,
                # Fabric truncates connect_timeout to an int; paramiko takes fractions here.
                "timeout": target.connect_timeout,
                "banner_timeout": target.connect_timeout,
                "auth_timeout": target.connect_timeout,
                "channel_timeout": target.connect_timeout,
            },
        )
        self.target = target
        self.gateway_process: GatewayProcess | None = None
        self.pinning = _PinningPolicy(target.known_hosts, target.trust_on_first_use)
        self.client.set_missing_host_key_policy(self.pinning)
        instance_id = target.host_id(host)
        if instance_id is not None:
            forget_if_rebuilt(target.known_hosts, _known_hosts_name(host, target.port), instance_id)
        if os.path.exists(target.known_hosts):
            _load_known_hosts(self.client, target.known_hosts)
        elif not target.trust_on_first_use:
            raise TargetError(
                "known_hosts",
                f"{target.known_hosts} does not exist",
                "create it with the host's key (ssh-keyscan), "
                "or set trust_on_first_use where the link is already authenticated",
            )

    def open_gateway(self):
        """The ProxyCommand, with %h, %p, %r and %% expanded here: Fabric's own expansion parses a dummy
        ssh_config without a Port line, so it turns %p into 22 whatever the target's port."""
        tokens = {"h": self.host, "p": str(self.target.port), "r": self.target.user, "%": "%"}
        command = re.sub(r"%(.)", lambda m: tokens.get(m.group(1), m.group(0)), self.target.gateway)
        self.gateway_process = GatewayProcess(command)
        return self.gateway_process

    def open(self):
        if self.is_connected:
            return None
        if not os.path.isfile(self.target.key_path):
            raise TargetError("key_path", f"{self.target.key_path} is not a file", "point key_path at the private key")
        try:
            result = super().open()
        except (HostKeyError, TargetError):
            self.client.close()
            raise
        except paramiko.BadHostKeyException as e:
            self.client.close()
            name = _known_hosts_name(self.host, self.port)
            raise HostKeyError(
                f"{self.host}: host key CHANGED ({e.key.get_name()} {e.key.fingerprint}, pinned "
                f"{e.expected_key.fingerprint} in {self.target.known_hosts}); refusing to connect. If the VM was "
                f"rebuilt, remove the old key with: ssh-keygen -R '{name}' -f {self.target.known_hosts}"
            ) from None
        except paramiko.AuthenticationException:
            self.client.close()
            raise AuthError(
                f"{self.host}: the server refused key {self.target.key_path} for user {self.user}; "
                "check that its public key is in the VM's authorized keys (instance metadata ssh-keys)"
            ) from None
        except NETWORK_ERRORS as e:
            said = self.gateway_process.stderr_tail() if self.gateway_process else ""
            self.client.close()
            reason = f"cannot connect to port {self.port}: {describe(e)}"
            if said and said not in reason:
                reason += f"; the gateway said: {said}"
            raise Unreachable(self.host, reason) from None
        # Only now, with the login accepted: a new VM's first-boot host key may still be replaced before its
        # guest agent has created the user, and recording that key would refuse the real one for good.
        self.pinning.record_accepted()
        self.transport.set_keepalive(self.target.keepalive_s)
        return result

    def abandon(self) -> None:
        """Drop the connection without another message to the server, for the way out of a Ctrl-C. Python raises
        KeyboardInterrupt wherever the main thread is, paramiko included, and it can leave a transport's send
        lock held for good; close() then sends the SFTP channel's close and waits for that lock forever (seen:
        `phase` on a slice hung after Ctrl-C). paramiko's Transport.close() only closes the socket, and after
        it every send returns at once. The server sees the connection end; detached jobs go on."""
        transport = self.client.get_transport()
        if transport is not None:
            transport.close()

    def close(self) -> None:
        """Fabric's close, which first sends the SFTP channel's close: on a link that has just died (the very
        reason most callers close) that send raises, and the connection is dropped without it."""
        try:
            super().close()
        except NETWORK_ERRORS:
            self.abandon()
            self._sftp = None
            self.client.close()

    def __exit__(self, kind, *_) -> None:
        if kind is not None and issubclass(kind, KeyboardInterrupt):
            self.abandon()
        self.close()


class _PinningPolicy(paramiko.MissingHostKeyPolicy):
    """Unknown host key: refuse, or (trust-on-first-use) accept it for this connection and append it to
    known_hosts, under a file lock, once authentication has succeeded (`record_accepted`)."""

    def __init__(self, known_hosts: str, trust_on_first_use: bool):
        self.known_hosts, self.trust = known_hosts, trust_on_first_use
        self.accepted: tuple[str, paramiko.PKey] | None = None

    def missing_host_key(self, client, hostname, key):
        if not self.trust:
            raise HostKeyError(
                f"{hostname}: host key {key.get_name()} {key.fingerprint} is not in {self.known_hosts}; refusing "
                f"to connect. Add the host's key to that file (ssh-keyscan), or set trust_on_first_use only where "
                "the link is already authenticated (IAP)"
            )
        client.get_host_keys().add(hostname, key.get_name(), key)
        self.accepted = (hostname, key)

    def record_accepted(self) -> None:
        if self.accepted is None:
            return
        hostname, key = self.accepted
        self.accepted = None
        # The Pulumi program names a file per VM in a folder that may not exist yet.
        os.makedirs(os.path.dirname(os.path.abspath(self.known_hosts)), mode=0o700, exist_ok=True)
        # Workers are reached in parallel: serialise appends so no line is torn or lost.
        with open(self.known_hosts, "a") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            f.write(f"{hostname} {key.get_name()} {key.get_base64()}\n")
        log.warning(
            "%s: recorded new host key %s %s in %s", hostname, key.get_name(), key.fingerprint, self.known_hosts
        )


def _load_known_hosts(client: paramiko.SSHClient, path: str) -> None:
    try:
        client.load_host_keys(path)
    except UnicodeDecodeError:
        raise TargetError(
            "known_hosts",
            f"{path} is not a text file (not UTF-8)",
            "point known_hosts at an OpenSSH known_hosts file, or remove the file to start one",
        ) from None
    except (OSError, paramiko.SSHException) as e:
        raise TargetError(
            "known_hosts",
            f"{path} cannot be read as a known_hosts file ({describe(e)})",
            "point known_hosts at an OpenSSH known_hosts file",
        ) from None


def connect(target: Target, host: str | None = None) -> Connection:
    """A connection to `host` (default: the target's main host), opened now so failures surface here."""
    conn = Connection(target, host or target.host)
    conn.open()
    return conn


def env_prefix(env: Mapping[str, str] | None) -> str:
    """`export K='v' …; ` with every value shell-quoted (Fabric's own `env=` does not quote)."""
    if not env:
        return ""
    for name, value in env.items():
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            raise BadInput(f"environment variable name {name!r} is not valid; use letters, digits and _")
        if not isinstance(value, str):
            raise BadInput(f"environment variable {name} must be a string, got {type(value).__name__}")
    return "export " + " ".join(f"{name}={shlex.quote(value)}" for name, value in env.items()) + "; "


def run(
    conn: Connection,
    command: str,
    *,
    env: Mapping[str, str] | None = None,
    timeout: float | None = None,
    warn: bool = False,
    stream: TextIO | None = None,
    err_stream: TextIO | None = None,
):
    """Run `command` under /bin/sh on the host; network failures and timeouts become `Unreachable`.

    Output is captured in the returned invoke `Result`, and also written as it arrives to `stream` (stdout)
    and `err_stream` (stderr; default: `stream`) if given. A non-zero exit raises `CommandFailed` unless `warn`.
    """
    output = (
        {"hide": True} if stream is None else {"hide": False, "out_stream": stream, "err_stream": err_stream or stream}
    )
    limit = timeout or conn.target.command_timeout
    started = time.monotonic()
    try:
        result = conn.run(env_prefix(env) + command, timeout=limit, warn=warn, in_stream=False, **output)
    except CommandTimedOut:
        conn.close()
        raise _timed_out(conn, limit) from None
    except UnexpectedExit as e:
        if _cut_by_timeout(e.result, started, limit):
            conn.close()
            raise _timed_out(conn, limit) from None
        tail = (e.result.stdout + e.result.stderr).splitlines()[-OUTPUT_TAIL_LINES:]
        raise CommandFailed(conn.host, e.result.exited, tuple(tail)) from None
    except ThreadException as e:
        # Invoke's timeout thread closes the channel while the output threads still read it: they fail first.
        conn.close()
        if time.monotonic() - started >= limit:
            raise _timed_out(conn, limit) from None
        raise Unreachable(conn.host, f"connection lost: {describe(e.exceptions[0].value)}") from None
    except NETWORK_ERRORS as e:
        conn.close()
        raise Unreachable(conn.host, f"connection lost: {describe(e)}") from None
    if _cut_by_timeout(result, started, limit):
        conn.close()
        raise _timed_out(conn, limit)
    return result


def _cut_by_timeout(result, started: float, limit: float) -> bool:
    """Invoke decides "timed out" by whether its timer thread has finished; a check that runs while the timer is
    still closing the channel sees a command without an exit status (-1) instead."""
    return result.exited == -1 and time.monotonic() - started >= limit


def _timed_out(conn: Connection, limit: float) -> Unreachable:
    return Unreachable(conn.host, f"no answer within {limit:g} s (command timeout)")


def _known_hosts_name(host: str, port: int) -> str:
    return host if port == 22 else f"[{host}]:{port}"
