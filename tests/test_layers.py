"""Imports go one way (ARCHITECTURE.md, "Layers"): __main__ builds infra and runs remote as a CLI; remote knows
no Pulumi and ships workload; workload knows neither Fabric nor Pulumi; the SSH toolkit (remote/ssh) knows
nothing of the pipeline built on it (remote/pipeline). Read from the source, so a new import anywhere is seen."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SSH_LIBRARIES = ("fabric", "invoke", "paramiko")
PULUMI = ("pulumi", "pulumi_gcp", "pulumi_command", "pulumi_random", "pulumi_policy")


def imported(package: str, root: Path = ROOT) -> dict[str, set[str]]:
    """Each module of `package` (a folder of `root`) → the top two levels of every name it imports."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        tree = ast.parse(path.read_text())
        names = {alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names}
        names |= {
            node.module
            for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and node.module and not node.level
        }
        found[str(path.relative_to(root))] = {".".join(name.split(".")[:2]) for name in names}
    return found


def offending(package: str, forbidden: tuple[str, ...], root: Path = ROOT) -> dict[str, list[str]]:
    def refused(name: str) -> bool:
        return any(name == f or name.startswith(f + ".") for f in forbidden)

    return {
        module: sorted(filter(refused, names))
        for module, names in imported(package, root).items()
        if any(map(refused, names))
    }


@pytest.mark.parametrize(
    ("package", "forbidden"),
    [
        ("workload", (*SSH_LIBRARIES, *PULUMI, "remote", "infra", "rehearsal", "policy")),
        ("remote", (*PULUMI, "infra", "rehearsal", "policy")),
        ("remote/ssh", ("remote.pipeline", "remote.cli")),
        # infra reads the stack's private key with paramiko (ssh_key_pair.py), but never connects.
        ("infra", ("remote.ssh", "remote.cli", "rehearsal", "fabric", "invoke")),
    ],
)
def test_imports_go_one_way(package, forbidden):
    assert offending(package, forbidden) == {}


def test_the_check_sees_a_forbidden_import(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "a.py").write_text("import os\nfrom remote.pipeline.phase import run_phase\n")
    (tmp_path / "pkg" / "b.py").write_text("import remote\nfrom . import a\n")
    assert offending("pkg", ("remote.pipeline",), tmp_path) == {"pkg/a.py": ["remote.pipeline"]}
