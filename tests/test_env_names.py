"""Each `TPU_SFT_*` environment variable is named once in the code: every other module imports its name from there
(most from workload/core/contract.py; autostop's from workload/spend/autostop.py, which imports nothing of tpu-sft).
Tests may spell the names out: they read the contract as a user's shell would."""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

from tests.source_tree import parse

ROOT = Path(__file__).resolve().parents[1]
CODE = ("__main__.py", "infra", "policy", "rehearsal", "remote", "workload", "bench", "tools")
NAME = re.compile(r"TPU_SFT_[A-Z0-9_]+")


def spelled_out(root: Path = ROOT, code: tuple[str, ...] = CODE) -> dict[str, list[str]]:
    """Each `TPU_SFT_*` name written as a whole string in the code → the modules that write it."""
    found = defaultdict(set)
    for entry in code:
        for path in [root / entry] if entry.endswith(".py") else sorted((root / entry).rglob("*.py")):
            for node in ast.walk(parse(path)):
                if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAME.fullmatch(node.value):
                    found[node.value].add(str(path.relative_to(root)))
    return {name: sorted(modules) for name, modules in sorted(found.items())}


def test_each_name_is_written_in_one_module():
    names = spelled_out()
    assert "TPU_SFT_TARGET" in names and "TPU_SFT_COMPUTE_API" in names
    assert {name: modules for name, modules in names.items() if len(modules) > 1} == {}


def test_the_check_sees_a_name_written_twice(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "one.py").write_text('"""Reads $TPU_SFT_X."""\nX = "TPU_SFT_X"\n')
    (tmp_path / "a" / "two.py").write_text('import os\nos.environ.get("TPU_SFT_X")\nprint("set $TPU_SFT_Y")\n')
    assert spelled_out(tmp_path, ("a",)) == {"TPU_SFT_X": ["a/one.py", "a/two.py"]}
