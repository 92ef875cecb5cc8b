"""The guard of every patch the trainer's launcher makes to MaxText's, Tunix's, qwix's or flax's code: a patch
replaces a function it has read, so it holds only for the version it was read in. Where the function is not there,
the installed package is another version, or the function's source is not the one read, training stops before it
starts, in one line naming the patch to re-check: a patch applied to code it was not written for could train wrongly
without a sign.

Standard library only; the sources' digests are taken with `hashlib.sha256(inspect.getsource(function))`.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import inspect
from types import ModuleType
from typing import Any

from workload.core import lock


class PatchedCodeChanged(RuntimeError):
    """The code a launcher patch replaces is not the code it was written for."""


def check(owner: ModuleType, attribute: str, distribution: str, source_sha256: str, patch: str) -> Any:
    """The module `owner`'s `attribute` (a dotted path: "PeftTrainer.__init__"), the function `patch` replaces. Raise
    PatchedCodeChanged, in one line, unless it is there, `distribution` is the lock's version and the function's
    source is the one read."""
    installed = importlib.metadata.version(distribution)
    pinned = lock.versions()[distribution]
    function: Any = owner
    for part in attribute.split("."):
        function = getattr(function, part, None)
        if function is None:
            raise PatchedCodeChanged(
                f"{distribution} {installed} has no {owner.__name__}.{attribute}, which {patch} replaces (written "
                f"for {distribution} {pinned}). Fix: install {distribution}=={pinned}, or re-read the code and "
                f"update {patch}"
            )
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
    return function
