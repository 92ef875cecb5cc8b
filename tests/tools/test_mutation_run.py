"""The mutation run (tools/mutation/run.py) makes the mutants it claims, and none where no behaviour could change."""

import ast
from pathlib import Path

import parso
import pytest
from cosmic_ray.ast import ast_nodes
from cosmic_ray.mutating import mutate_code

from tests.source_tree import parse
from tools.mutation.operators import OPERATORS
from tools.mutation.run import (
    MODULES,
    REPO,
    _in_annotation,
    _in_log_call,
    _parameter_marker,
    read_equivalents,
    work_items,
)


@pytest.mark.parametrize("name", sorted(OPERATORS))
def test_each_protection_operator_makes_its_mutants(name):
    operator = OPERATORS[name]
    for example in operator.examples():
        mutated = mutate_code(example.pre_mutation_code, operator(), example.occurrence)
        assert (mutated or example.pre_mutation_code) == example.post_mutation_code


def test_the_known_regressions_are_among_the_mutants(monkeypatch):
    """The two protections the issue found unguarded: the job's secret.env mode and the default SSH range."""
    monkeypatch.chdir(REPO)  # the run names modules relative to the tree it mutates
    made = {
        (w.mutations[0].module_path.as_posix(), w.mutations[0].operator_name, w.mutations[0].start_pos[0])
        for module, target in MODULES.items()
        for w in work_items(module, target)
    }
    jobs, settings = Path("remote/ssh/jobs.py").read_text(), Path("infra/config/setting_table.py").read_text()
    chmod_line = next(i for i, line in enumerate(jobs.splitlines(), 1) if "f.chmod(0o600)" in line)
    iap_line = next(i for i, line in enumerate(settings.splitlines(), 1) if line.startswith("IAP_RANGE = "))
    assert ("remote/ssh/jobs.py", "tpu-sft/WidenFileMode", chmod_line) in made
    assert ("remote/ssh/jobs.py", "tpu-sft/SkipProtection", chmod_line) in made
    assert ("infra/config/setting_table.py", "tpu-sft/OpenToInternet", iap_line) in made


def test_no_mutants_in_annotations_signature_markers_or_log_lines():
    tree = parso.parse(
        "def f(a: int | None, *, b: str = 'x') -> list[int] | None:\n"
        "    c: int | None = a * 2\n"
        "    log.info('%s', c[:12])\n"
    )
    operators = [n for n in ast_nodes(tree) if getattr(n, "value", None) in ("|", "*", "12")]
    skipped = [(n.value, _in_annotation(n) or _parameter_marker(n) or _in_log_call(n)) for n in operators]
    assert skipped == [("|", True), ("*", True), ("|", True), ("|", True), ("*", False), ("12", True)]


def test_every_listed_equivalent_names_a_protection_module_and_a_reason():
    for entry in read_equivalents():
        assert entry.module in MODULES
        assert entry.line in (REPO / entry.module).read_text()
        assert len(entry.reason.split()) >= 5


def _defined_names(path: Path) -> set[str]:
    """What a scope may name in a module: its functions and classes at any depth (cosmic-ray names a mutant by
    the innermost one around it), and "<module>" for code outside any."""
    tree = parse(path)
    kinds = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
    return {"<module>"} | {node.name for node in ast.walk(tree) if isinstance(node, kinds)}


@pytest.mark.parametrize("module", sorted(MODULES))
def test_every_listed_module_test_and_scope_name_exists(module):
    """A name that exists nowhere would leave its protections unmutated without a word: the run must not
    trust a stale list in pyproject.toml."""
    target = MODULES[module]
    assert (REPO / module).is_file(), f"{module} does not exist"
    for test in target.tests:
        path, _, function = test.partition("::")
        assert (REPO / path).is_file(), f"{module}: test file {path} does not exist"
        if function:
            assert function in _defined_names(REPO / path), f"{module}: {path} defines no {function}"
    missing = sorted(set(target.scope) - _defined_names(REPO / module))
    assert not missing, f"{module}: scope names {missing} are defined nowhere in it"
