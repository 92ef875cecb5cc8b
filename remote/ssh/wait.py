"""Wait for a freshly created VM to answer SSH."""

from __future__ import annotations

import dataclasses
import logging
import socket
import time

from remote.ssh.connection import Connection, connect
from remote.ssh.errors import AuthError, TargetError, Unreachable
from remote.ssh.gateway import check_gcloud
from remote.ssh.target import Target

log = logging.getLogger("remote")

NEW_VM_DEADLINE_S = 600.0  # a VM `pulumi up` just created may take minutes to answer SSH and accept the key


def require_resolvable(host: str, port: int) -> None:
    """A name that does not resolve now will not resolve by waiting: fail at once, not at the deadline. A
    temporary failure of the resolver itself (EAI_AGAIN) is left to the retries."""
    try:
        socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as e:
        if e.errno == socket.EAI_AGAIN:
            return
        raise TargetError(
            "host",
            f"{host!r} does not resolve ({e.strerror})",
            "check the name, or give the VM's IP address (or a gateway that resolves it)",
        ) from None
    except UnicodeError:
        raise TargetError("host", f"{host!r} is not a valid host name", "check the name") from None


def wait_for_ssh(
    target: Target,
    deadline_s: float = 300.0,
    host: str | None = None,
    *,
    first_backoff_s: float = 0.5,
    max_backoff_s: float = 10.0,
) -> Connection:
    """Connect to `host` (default: the main host), retrying with exponential backoff for up to `deadline_s`.

    Retries while the host does not answer or refuses the key: a new GCE VM answers SSH before its guest
    agent has installed the metadata keys. A refused host key is never retried, nor a gateway (gcloud) that is
    missing or not logged in. Returns the open connection;
    raises `Unreachable` at the deadline, naming the last failure.
    """
    host = host or target.host
    check_gcloud(target.gateway)  # a missing or logged-out gcloud would fail every attempt until the deadline
    if not target.gateway:  # a gateway (IAP) resolves the name itself: an instance name is not in DNS
        require_resolvable(host, target.port)
    start = time.monotonic()
    backoff, attempts = first_backoff_s, 0
    while True:
        remaining = deadline_s - (time.monotonic() - start)
        attempts += 1
        # No single attempt may run past the deadline.
        attempt_target = dataclasses.replace(target, connect_timeout=max(0.1, min(target.connect_timeout, remaining)))
        try:
            conn = connect(attempt_target, host)
            log.info("%s answered SSH after %.1f s (%d attempts)", host, time.monotonic() - start, attempts)
            return conn
        except (Unreachable, AuthError) as e:
            last = str(e)
        remaining = deadline_s - (time.monotonic() - start)
        if remaining <= 0:
            raise Unreachable(host, f"no SSH answer within {deadline_s:g} s ({attempts} attempts; last: {last})")
        log.info("waiting for SSH on %s (%s); next try in %.1f s", host, last, min(backoff, remaining))
        time.sleep(min(backoff, remaining))
        backoff = min(backoff * 2, max_backoff_s)
