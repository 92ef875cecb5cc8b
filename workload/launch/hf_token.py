"""The Hugging Face token: read from a 0600 file or the `HF_TOKEN` environment variable, handed to MaxText
as a 0600 file named by `HF_TOKEN_PATH`, and scrubbed from anything the runner writes.

Not as `HF_TOKEN`: MaxText 0.2.3's pyconfig copies `$HF_TOKEN` into its config's `hf_access_token`
(`configs/pyconfig.py` `_resolve_or_infer_addl_config`) and writes the whole config into its TensorBoard event
files (`common/metric_logger.py` `write_setup_info_to_tensorboard`), in the bucket before any masking could run.
With no `hf_access_token`, every MaxText call that needs the token passes `token=None` to transformers, datasets
or huggingface_hub, which then read `HF_TOKEN_PATH` (huggingface_hub `utils/_auth.py` `get_token`).

Errors name the file, never the token.
"""

from __future__ import annotations

import os
import stat
import tempfile
from contextlib import contextmanager
from typing import Iterator, Mapping

ENV = "HF_TOKEN"
PATH_ENV = "HF_TOKEN_PATH"
# huggingface_hub prefers either variable to HF_TOKEN_PATH: a child sees neither, so the token it uses is the file's.
TOKEN_ENVS = (ENV, "HUGGING_FACE_HUB_TOKEN")
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


def without_token(environ: Mapping[str, str]) -> dict[str, str]:
    """`environ` without the variables that carry a token itself."""
    return {key: value for key, value in environ.items() if key not in TOKEN_ENVS}


@contextmanager
def token_file_env(path: str | None, token: str | None) -> Iterator[dict[str, str]]:
    """The environment that hands `token` to a child: `HF_TOKEN_PATH` naming a 0600 file, `path` itself when the
    token came from that file (read_token checked its mode), else a private copy in the system's temporary
    directory, outside every directory of the run, removed afterwards. Empty when there is no token."""
    if not token:
        yield {}
    elif path is not None:
        yield {PATH_ENV: os.path.abspath(path)}
    else:
        with tempfile.TemporaryDirectory(prefix="tpu-sft-hf-token-") as private:  # 0700
            copy = os.path.join(private, "token")
            fd = os.open(copy, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(token)
            yield {PATH_ENV: copy}
