"""A launcher patch's guard (workload/launch/pinned_code.py) refuses, in one line, code it was not written for:
a function that is not there, another version, other source. Never an AttributeError: the chip's flax 0.12.8 has no
`flax.nnx.graph._graph_update_dynamic`, and QLoRA's guard crashed on it (issue 74). A stand-in module here; the real
patches' guards are tested with their packages (test_quantised_base.py, patch_guard.py)."""

import hashlib
import importlib.metadata
import inspect
import types

import pytest

from workload.launch import pinned_code

INSTALLED = importlib.metadata.version("pytest")  # a distribution every venv of the suite has


def mended(x):
    return x + 1


@pytest.fixture
def pinned(monkeypatch):
    """A module of pytest's with one function, pytest pinned at its installed version (or at another)."""
    module = types.ModuleType("pytest_stand_in")
    module.Runner = type("Runner", (), {"mended": staticmethod(mended)})
    versions = {"pytest": INSTALLED}
    monkeypatch.setattr(pinned_code.lock, "versions", lambda: versions)
    return module, versions


DIGEST = hashlib.sha256(inspect.getsource(mended).encode()).hexdigest()


def test_the_code_read_is_returned(pinned):
    module, _ = pinned
    assert pinned_code.check(module, "Runner.mended", "pytest", DIGEST, "p.py") is mended


def test_an_absent_function_is_a_one_line_refusal_naming_versions_and_the_patch(pinned, monkeypatch):
    module, versions = pinned
    monkeypatch.delattr(module.Runner, "mended")
    versions["pytest"] = "0.0.1"
    with pytest.raises(pinned_code.PatchedCodeChanged) as refused:
        pinned_code.check(module, "Runner.mended", "pytest", DIGEST, "workload/launch/p.py")
    said = str(refused.value)
    assert said == (
        f"pytest {INSTALLED} has no pytest_stand_in.Runner.mended, which workload/launch/p.py replaces (written for "
        "pytest 0.0.1). Fix: install pytest==0.0.1, or re-read the code and update workload/launch/p.py"
    )
    monkeypatch.delattr(module, "Runner")
    with pytest.raises(pinned_code.PatchedCodeChanged, match="has no pytest_stand_in.Runner.mended"):
        pinned_code.check(module, "Runner.mended", "pytest", DIGEST, "workload/launch/p.py")


def test_another_version_or_other_source_is_refused(pinned):
    module, versions = pinned
    with pytest.raises(pinned_code.PatchedCodeChanged, match="differs from the code p.py was written for"):
        pinned_code.check(module, "Runner.mended", "pytest", "0" * 64, "p.py")
    versions["pytest"] = "0.0.1"
    with pytest.raises(pinned_code.PatchedCodeChanged, match=f"^pytest {INSTALLED}'s mended is not 0.0.1's"):
        pinned_code.check(module, "Runner.mended", "pytest", DIGEST, "p.py")
