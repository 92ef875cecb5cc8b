"""A loopback address of its own for each simulated VM, so its sshd listens on port 22 like a real one.

127.0.0.1–4 belong to the tests' own sshds; a VM (or a host of rehearsal/slice_hosts.py) takes the first of
127.0.0.20–250 whose port 22 is free and holds a lock on it, so two rehearsals on this machine never share one.
"""

from __future__ import annotations

import fcntl
import socket
from pathlib import Path
from typing import IO

LOCKS = Path("/run/tpu-sft-fresh-vm")
FIRST, LAST = 20, 250


class NoFreeAddress(RuntimeError):
    pass


def claim_address() -> tuple[str, IO]:
    """A free 127.0.0.N and the open lock file that holds it (closing the file releases the address)."""
    LOCKS.mkdir(parents=True, exist_ok=True)
    for n in range(FIRST, LAST + 1):
        address = f"127.0.0.{n}"
        lock = open(LOCKS / f"{address}.lock", "w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            continue
        if _port_free(address, 22):
            return address, lock
        lock.close()
    raise NoFreeAddress(
        f"no free loopback address in 127.0.0.{FIRST}–{LAST} (port 22 taken on each). "
        "Fix: stop the other rehearsals, or free port 22 on one of them"
    )


def _port_free(address: str, port: int) -> bool:
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((address, port))
        except OSError:
            return False
    return True
