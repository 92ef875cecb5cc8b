"""The guard of every patch the trainer's launcher makes to MaxText's or Tunix's code: a patch replaces a function it
has read, so it holds only for the version it was read in. Where the installed package is another version, or the
function's source is not the one read, training stops before it starts, naming the patch to re-check: a patch
applied to code it was not written for could train wrongly without a sign.

Standard library only; the sources' digests are taken with `hashlib.sha256(inspect.getsource(function))`.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
from typing import Callable

from workload.core import lock


class PatchedCodeChanged(RuntimeError):
    """The code a launcher patch replaces is not the code it was written for."""


def check(function: Callable, distribution: str, source_sha256: str, patch: str) -> None:
    """Raise PatchedCodeChanged unless `distribution` is the lock's version and `function`'s source is the one read."""
    installed = importlib.metadata.version(distribution)
    pinned = lock.versions()[distribution]
    name = f"{distribution} {installed}'s {function.__qualname__}"
    if installed != pinned:
        raise PatchedCodeChanged(
            f"{name} is not {pinned}'s, which {patch} was written for. Fix: install {distribution}=={pinned}, "
            f"or re-read the function and update {patch}"
        )
    digest = hashlib.sha256(inspect.getsource(function).encode()).hexdigest()
    if digest != source_sha256:
        raise PatchedCodeChanged(
            f"{name} differs from the code {patch} was written for (sha256 {digest[:12]}, expected "
            f"{source_sha256[:12]}). Fix: re-read the function and update {patch}"
        )
