"""Run inside a live script in the MaxText venv: what a launcher patch of Tunix says where the digest or the version
is not the one it was written for, and whether it patched anyway (workload/launch/pinned_code.py)."""

from types import ModuleType
from typing import Callable

from workload.core import lock
from workload.launch import pinned_code


def refusals(patch: ModuleType, digest_name: str, patched: Callable[[], bool]) -> dict:
    """`patch`: the launcher's module, its `patch_tunix` and its digest `digest_name`; `patched`: whether Tunix's
    method is the patch's now."""
    said: dict[str, object] = {}
    digest = getattr(patch, digest_name)
    for case, version, source in (("changed code", None, "0" * 64), ("another version", "0.0.1", digest)):
        setattr(patch, digest_name, source)
        if version:
            lock.versions()["google-tunix"] = version
        try:
            patch.patch_tunix()
        except pinned_code.PatchedCodeChanged as error:
            said[case] = str(error)
    said["patched"] = patched()
    setattr(patch, digest_name, digest)
    lock.versions.cache_clear()
    return said
