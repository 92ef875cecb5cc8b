"""Python source read as a syntax tree, for the tests that check the code itself (layers, names, imports)."""

from __future__ import annotations

import ast
import gc
from pathlib import Path


def parse(path: Path) -> ast.Module:
    """The module's syntax tree, parsed with the collector paused. CPython 3.11.7's conversion to `ast` objects counts
    its depth in one place per interpreter, so a collection in its middle whose finalizer parses too (asyncio logging a
    failed program run's never-retrieved exception formats its traceback with `ast`) fails it with SystemError
    "AST constructor recursion depth mismatch"; seen in tests/test_layers.py after
    tests/infra/resources/test_vm_outside_state.py in one process."""
    gc.disable()
    try:
        return ast.parse(path.read_text())
    finally:
        gc.enable()
