"""The Hugging Face token: read from a 0600 file or the `HF_TOKEN` environment variable, handed to MaxText
only through its environment, and scrubbed from anything the runner writes.

Errors name the file, never the token.
"""

from __future__ import annotations

import os
import stat
from typing import Mapping

ENV = "HF_TOKEN"
REDACTED = "[HF_TOKEN]"


class TokenError(ValueError):
    pass


def read_token(path: str | None, environ: Mapping[str, str]) -> str | None:
    """The token from `path` if given (which must be private to its owner), else from HF_TOKEN, else None
    (enough for the tiny profile and for public models)."""
    if path is None:
        return environ.get(ENV) or None
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        raise TokenError(f"HF token file {path}: {error.strerror}") from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise TokenError(f"HF token file {path} is readable by others (mode {stat.S_IMODE(mode):o}); chmod 600 {path}")
    try:
        with open(path, encoding="utf-8") as f:
            token = f.read().strip()
    except OSError as error:
        raise TokenError(f"HF token file {path}: {error.strerror}") from None
    except UnicodeDecodeError:
        raise TokenError(f"HF token file {path} is not UTF-8 text; put the token alone in it") from None
    if not token:
        raise TokenError(f"HF token file {path} is empty")
    return token


def redactor(token: str | None):
    """A function that replaces the token in a line of text (identity when there is no token)."""
    if not token:
        return lambda text: text
    return lambda text: text.replace(token, REDACTED)
