"""A CLI's last line of defence: an exception nobody expected becomes one line on stderr naming a log file
that holds its traceback. A user never sees a traceback; the one who fixes the bug gets all of it.

Lives in workload/core/ because the workload is shipped to the VM alone; the remote CLI uses it too.
"""

from __future__ import annotations

import os
import tempfile
import traceback
from typing import Iterable

REDACTED = "[REDACTED]"
_MESSAGE_CHARS = 200


def report(prog: str, error: BaseException, secrets: Iterable[str | None] = ()) -> str:
    """Write `error`'s traceback, with every secret replaced, to a new 0600 log file named after `prog`; return
    the line to show (without a prefix: each CLI adds its own)."""
    known = [s for s in secrets if s]

    def scrub(text: str) -> str:
        for secret in known:
            text = text.replace(secret, REDACTED)
        return text

    message = scrub(str(error)).strip().splitlines()
    summary = type(error).__name__ + (f": {message[0][:_MESSAGE_CHARS]}" if message else "")
    try:
        fd, path = tempfile.mkstemp(prefix=f"{prog.replace(' ', '-')}-error-", suffix=".log")
        with os.fdopen(fd, "w", encoding="utf-8", errors="replace") as log:
            log.write(scrub("".join(traceback.format_exception(error))))
        where = f"the traceback is in {path}"
    except OSError as unwritable:
        where = f"no traceback was saved ({unwritable.strerror})"
    return f"unexpected error ({summary}), a bug in tpu-sft (please report it): {where}"
