"""workload/core/ is imported by every layer, off the VM and on it: it may import the standard library and
itself, nothing else (not the rest of workload/, which needs MaxText's venv for some steps)."""

import ast
import sys
from pathlib import Path

import pytest

from tests.source_tree import parse

CORE = Path(__file__).resolve().parents[3] / "workload" / "core"


def _imported(path: Path) -> list[str]:
    tree = parse(path)
    names = [alias.name for node in ast.walk(tree) if isinstance(node, ast.Import) for alias in node.names]
    return names + [node.module or "" for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)]


@pytest.mark.parametrize("module", sorted(path.name for path in CORE.glob("*.py")))
def test_the_core_imports_the_standard_library_and_itself_only(module):
    outside = [
        name
        for name in _imported(CORE / module)
        if name.partition(".")[0] not in sys.stdlib_module_names
        and name != "workload.core"
        and not name.startswith("workload.core.")
    ]
    assert outside == []
