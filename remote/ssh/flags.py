"""Strict parsers for the remote CLI's numeric flags (argparse `type=`).

int() and float() accept more than a user means: other scripts' digits ("٣"), surrounding whitespace and
newlines, "1_000", "nan" and "inf". A flag's value here is ASCII digits, finite, and in its range.
"""

from __future__ import annotations

import argparse
import math
import re

from remote.ssh.errors import BadInput
from remote.ssh.jobs import check_job_id

_INT = re.compile(r"[0-9]+")
_NUMBER = re.compile(r"[0-9]+(\.[0-9]*)?|\.[0-9]+")


def _number(text: str, what: str) -> float:
    if not _NUMBER.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
    value = float(text)
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"{text!r} is not {what}")
    return value


def positive_seconds(text: str) -> float:
    """A duration: more than 0 seconds, at most a day (no remote wait is longer)."""
    value = _number(text, "a number of seconds like 10 or 0.5")
    if not 0 < value <= 86400:
        raise argparse.ArgumentTypeError(f"{text!r} seconds is not more than 0 and at most 86400")
    return value


def grace_seconds(text: str) -> float:
    """A grace period: 0 (no grace: SIGKILL at once) up to an hour."""
    value = _number(text, "a number of seconds like 10 (0: no grace)")
    if value > 3600:
        raise argparse.ArgumentTypeError(f"{text!r} seconds is more than an hour")
    return value


def byte_offset(text: str) -> int:
    if not _INT.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not a byte offset (0 or more, digits only)")
    return int(text)


def port(text: str) -> int:
    if not _INT.fullmatch(text) or not 1 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (1–65535)")
    return int(text)


def job_id(text: str) -> str:
    try:
        return check_job_id(text)
    except BadInput as e:
        raise argparse.ArgumentTypeError(str(e)) from None
