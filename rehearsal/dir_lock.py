"""One rehearsal per directory: two would start two sshds on one host state and fail at bootstrap on each
other's known_hosts. flock is released by the kernel when its holder dies, so a killed rehearsal never
leaves a stale lock."""

from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path
from typing import Iterator

LOCK_NAME = ".rehearsal.lock"


class DirectoryUnusable(Exception):
    pass


@contextlib.contextmanager
def exclusive(directory: Path) -> Iterator[None]:
    """Hold `directory`'s rehearsal lock (the directory is created if missing) or raise `DirectoryUnusable`."""
    try:
        directory.mkdir(parents=True, exist_ok=True)
        handle = open(directory / LOCK_NAME, "a+", encoding="utf-8")
    except OSError as e:
        raise DirectoryUnusable(f"cannot use {directory} ({e.strerror}); give another --dir") from None
    with handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip() or "unknown"
            raise DirectoryUnusable(
                f"another rehearsal (pid {holder}) is running in {directory}; wait for it to end, "
                "or give this one another --dir"
            ) from None
        handle.seek(0)
        handle.truncate()
        handle.write(f"{os.getpid()}\n")
        handle.flush()
        yield
