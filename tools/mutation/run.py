"""Mutation testing of the protection modules: would a test notice if a protection were removed?

Each module of [tool.mutation.modules] in pyproject.toml is mutated with cosmic-ray, one mutant at a time, and
only its own fast test subset runs against each mutant (a fresh pytest process: the remote tests start their own
sshd servers). A mutant is
  killed      a test failed
  survived    every test passed: a protection no test notices (or an equivalent mutant not yet listed)
  equivalent  listed in tools/mutation/equivalent.txt with the reason no behaviour can tell it apart
  timeout     the tests ran past the limit (counted as killed by cosmic-ray; shown apart here)
The mutants are made in a scratch copy of the tree, never in the working tree, so an interrupted run leaves no
mutant behind. Sessions are kept in .cache/mutation/<module>.sqlite (`cr-report`, `cr-html` read them).

Run (as root: the remote tests start sshd):
  nice -n 10 .venv/bin/python -m tools.mutation                          every module, then the scores
  nice -n 10 .venv/bin/python -m tools.mutation --module remote/ssh/jobs.py  one module
  … --module infra/config/cross_key_rules.py --only core/AddNot:40              one survivor again, after a new test
Exit status 1 if any mutant survived.
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import tomllib
from dataclasses import dataclass
from pathlib import Path

import cosmic_ray.plugins
from cosmic_ray.ast import ast_nodes, get_ast_from_path
from cosmic_ray.ast.ast_query import ASTQuery
from cosmic_ray.mutating import mutate_and_test, mutate_code
from cosmic_ray.testing import run_tests
from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import MutationSpec, WorkerOutcome, WorkItem, WorkResult

from tools.mutation.operators import ProtectionOperators

REPO = Path(__file__).resolve().parents[2]
EQUIVALENT_FILE = Path(__file__).resolve().parent / "equivalent.txt"
SESSIONS = REPO / ".cache" / "mutation"
PROVIDER = "tpu-sft"


@dataclass(frozen=True)
class Target:
    tests: tuple[str, ...]  # the fast subset that covers the module
    scope: tuple[str, ...] = ()  # functions and classes to mutate ("<module>": module-level code); empty: all

    def covers(self, definition: str | None) -> bool:
        return not self.scope or (definition or "<module>") in self.scope


def read_modules(path: Path = REPO / "pyproject.toml") -> dict[str, Target]:
    """[tool.mutation.modules] of pyproject.toml: each protection module, its tests and its scope."""
    table = tomllib.loads(path.read_text())["tool"]["mutation"]["modules"]
    return {module: Target(tuple(entry["tests"]), tuple(entry.get("scope", ()))) for module, entry in table.items()}


MODULES = read_modules()

# cosmic-ray's core operators, with one replacement per arithmetic and comparison operator (its inverse or its
# boundary) instead of all eleven: in this code the others are killed by the same tests (strings and paths
# raise TypeError) and would multiply the run time by about six. ExceptionReplacer is left out for
# ReplaceException (tools/mutation/operators.py), which also handles dotted names.
_BINARY = {
    "Add": "Sub",
    "Sub": "Add",
    "Mul": "Div",
    "Div": "Mul",
    "FloorDiv": "Mul",
    "Mod": "FloorDiv",
    "Pow": "Mul",
    "LShift": "RShift",
    "RShift": "LShift",
    "BitOr": "BitAnd",
    "BitAnd": "BitOr",
    "BitXor": "BitOr",
}
_COMPARISON = {
    "Eq": ("NotEq",),
    "NotEq": ("Eq",),
    "Lt": ("LtE", "GtE"),
    "LtE": ("Lt", "Gt"),
    "Gt": ("GtE", "LtE"),
    "GtE": ("Gt", "Lt"),
    "Is": ("IsNot",),
    "IsNot": ("Is",),
    "In": ("NotIn",),
    "NotIn": ("In",),
}
CORE_OPERATORS = (
    *(f"core/ReplaceBinaryOperator_{a}_{b}" for a, b in _BINARY.items()),
    *(f"core/ReplaceComparisonOperator_{a}_{b}" for a, bs in _COMPARISON.items() for b in bs),
    "core/ReplaceUnaryOperator_Delete_Not",
    "core/ReplaceUnaryOperator_USub_UAdd",
    "core/AddNot",
    "core/ReplaceTrueWithFalse",
    "core/ReplaceFalseWithTrue",
    "core/ReplaceAndWithOr",
    "core/ReplaceOrWithAnd",
    "core/ReplaceBreakWithContinue",
    "core/ReplaceContinueWithBreak",
    "core/NumberReplacer",
    "core/RemoveDecorator",
    "core/ZeroIterationForLoop",
)


def operator_names() -> tuple[str, ...]:
    cosmic_ray.plugins.OPERATOR_PROVIDERS.setdefault(PROVIDER, ProtectionOperators())
    known = set(cosmic_ray.plugins.operator_names())
    core = tuple(name for name in CORE_OPERATORS if name in known)
    return core + tuple(f"{PROVIDER}/{name}" for name in ProtectionOperators())


@dataclass(frozen=True)
class Equivalent:
    module: str
    operator: str
    line: str  # the source line the mutant changes, stripped
    becomes: str  # what that line becomes, where the line's other mutants of this operator are not equivalent
    reason: str


def read_equivalents(path: Path = EQUIVALENT_FILE) -> list[Equivalent]:
    """`module | operator | source line[ => mutated line] | reason` per line; `#` starts a comment line."""
    entries = []
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        fields = [f.strip() for f in raw.split(" | ", 3)]
        if len(fields) != 4 or not all(fields):
            sys.exit(f"{path}:{number}: expected `module | operator | source line | reason`")
        module, operator, line, reason = fields
        line, _, becomes = line.partition(" => ")
        entries.append(Equivalent(module, operator, line, becomes, reason))
    return entries


def _in_annotation(node) -> bool:
    """Under `from __future__ import annotations` (every protection module) no annotation is ever evaluated:
    a mutant there cannot change behaviour, so none is made."""
    child, parent = node, node.parent
    while parent is not None:
        siblings = parent.children
        before = siblings[siblings.index(child) - 1] if siblings.index(child) else None
        if parent.type in ("tfpdef", "annassign") and getattr(before, "value", None) == ":":
            return True
        if parent.type == "funcdef" and getattr(before, "value", None) == "->":
            return True
        child, parent = parent, parent.parent
    return False


def _parameter_marker(node) -> bool:
    """cosmic-ray takes the bare `*` (and `/`) of a signature for an arithmetic operator: not an expression."""
    return node.type == "operator" and node.value in ("*", "/") and node.parent.type in ("parameters", "typedargslist")


def _in_log_call(node) -> bool:
    """A log line's wording protects nothing: no mutants inside `log.…(…)` calls."""
    while node is not None:
        if node.type in ("atom_expr", "power") and getattr(node.children[0], "value", None) == "log":
            return True
        node = node.parent
    return False


def work_items(module: str, target: Target):
    tree = get_ast_from_path(Path(module))
    for name in operator_names():
        operator = cosmic_ray.plugins.get_operator(name)()
        positions = ((node, start, end) for node in ast_nodes(tree) for start, end in operator.mutation_positions(node))
        for occurrence, (node, start, end) in enumerate(positions):
            definition = ASTQuery(node).get_definition_name()
            skipped = _in_annotation(node) or _parameter_marker(node) or _in_log_call(node)
            if skipped or not target.covers(definition):
                continue
            spec = MutationSpec(
                module_path=module,
                operator_name=name,
                occurrence=occurrence,
                start_pos=start,
                end_pos=end,
                definition_name=definition,
            )
            yield WorkItem.single(job_id=f"{name}:{occurrence}", mutation=spec)


def _scratch_copy() -> Path:
    """The tree as git sees it (tracked and untracked, not ignored), with the project's venv linked in."""
    scratch = Path(tempfile.mkdtemp(prefix="tpu-sft-mutation-"))
    files = (
        subprocess.run(
            ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True, capture_output=True
        )
        .stdout.decode()
        .split("\0")
    )
    for rel in filter(None, files):
        source = REPO / rel
        if source.is_file():
            (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, scratch / rel)
    (scratch / ".venv").symlink_to(REPO / ".venv")
    return scratch


def _test_command(target: Target) -> str:
    return f"{REPO / '.venv/bin/python'} -m pytest --all-tiers -x -q -p no:cacheprovider " + " ".join(target.tests)


@dataclass(frozen=True)
class Mutant:
    operator: str
    line_no: int
    line: str  # the source line it changes, stripped
    diff: str
    output: str  # the tests' output, or why it is equivalent


OUTCOMES = ("killed", "survived", "equivalent", "timeout", "error")


def _equivalent(equivalents: list[Equivalent], module: str, spec: MutationSpec, source: str) -> Equivalent | None:
    line = source.splitlines()[spec.start_pos[0] - 1].strip()
    for e in equivalents:
        if (e.module, e.operator, e.line) != (module, spec.operator_name, line):
            continue
        operator = cosmic_ray.plugins.get_operator(spec.operator_name)()
        mutated = mutate_code(source, operator, spec.occurrence) if e.becomes else None
        if not e.becomes or (mutated and mutated.splitlines()[spec.start_pos[0] - 1].strip() == e.becomes):
            return e
    return None


def run_module(
    module: str, equivalents: list[Equivalent], only: frozenset[str] = frozenset()
) -> dict[str, list[Mutant]]:
    """Mutate one module in a scratch copy, each mutant against the module's tests; the mutants by outcome.
    `only`: just the mutants of these `operator:line` pairs (a survivor re-tested once a test is added)."""
    target = MODULES[module]
    SESSIONS.mkdir(parents=True, exist_ok=True)
    session = SESSIONS / (module.replace("/", "_").removesuffix(".py") + ".sqlite")
    session.unlink(missing_ok=True)
    scratch = _scratch_copy()
    here = os.getcwd()
    os.chdir(scratch)
    try:
        source = Path(module).read_text()
        lines = source.splitlines()
        started = time.monotonic()
        outcome, output = run_tests(_test_command(target), 600)
        baseline = time.monotonic() - started
        if outcome.value != "survived":
            sys.exit(f"{module}: its tests fail without any mutant; fix them first:\n{output[-3000:]}")
        timeout = 3 * baseline + 15
        with use_db(str(session), WorkDB.Mode.create) as db:
            db.clear()
            db.add_work_items(
                w
                for w in work_items(module, target)
                if not only or f"{w.mutations[0].operator_name}:{w.mutations[0].start_pos[0]}" in only
            )
            items = db.pending_work_items
            print(
                f"{module}: {len(items)} mutants against {' '.join(target.tests)} ({baseline:.0f} s unmutated)",
                flush=True,
            )
            for n, item in enumerate(items, 1):
                spec = item.mutations[0]
                line = lines[spec.start_pos[0] - 1].strip()
                match = _equivalent(equivalents, module, spec, source)
                if match:
                    db.set_result(item.job_id, WorkResult(WorkerOutcome.SKIPPED, output=match.reason))
                    continue
                result = mutate_and_test(item.mutations, _test_command(target), timeout)
                db.set_result(item.job_id, result)
                if not result.is_killed:
                    print(
                        f"  [{n}/{len(items)}] survived: {spec.operator_name} line {spec.start_pos[0]}: {line}",
                        flush=True,
                    )
            return _by_outcome(db, lines)
    finally:
        os.chdir(here)
        shutil.rmtree(scratch, ignore_errors=True)


def _by_outcome(db: WorkDB, lines: list[str]) -> dict[str, list[Mutant]]:
    outcomes: dict[str, list[Mutant]] = {k: [] for k in OUTCOMES}
    for item, result in db.completed_work_items:
        spec = item.mutations[0]
        mutant = Mutant(
            spec.operator_name,
            spec.start_pos[0],
            lines[spec.start_pos[0] - 1].strip(),
            result.diff or "",
            result.output or "",
        )
        if result.worker_outcome == WorkerOutcome.SKIPPED:
            outcomes["equivalent"].append(mutant)
        elif result.worker_outcome != WorkerOutcome.NORMAL:
            outcomes["error"].append(mutant)
        elif result.output == "timeout":  # cosmic-ray counts a timeout as killed; shown apart here
            outcomes["timeout"].append(mutant)
        else:
            outcomes["killed" if result.is_killed else "survived"].append(mutant)
    return outcomes


def _stale(equivalents: list[Equivalent], results: dict[str, dict[str, list[Mutant]]]) -> list[Equivalent]:
    """Listed equivalents of the modules just run that matched no mutant: the code changed under them."""
    matched = {(module, m.operator, m.line) for module, o in results.items() for m in o["equivalent"]}
    return [e for e in equivalents if e.module in results and (e.module, e.operator, e.line) not in matched]


def print_scores(results: dict[str, dict[str, list[Mutant]]]) -> None:
    print(f"\n| module | {' | '.join(OUTCOMES)} | score |\n|---|{'---:|' * len(OUTCOMES)}---:|")
    for module, outcomes in results.items():
        counts = {k: len(v) for k, v in outcomes.items()}
        judged = counts["killed"] + counts["timeout"] + counts["survived"]
        score = f"{100 * (judged - counts['survived']) / judged:.0f}%" if judged else "-"
        print(f"| {module} | {' | '.join(str(counts[k]) for k in OUTCOMES)} | {score} |")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m tools.mutation", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--module",
        action="append",
        choices=sorted(MODULES),
        help="mutate only this module (repeatable); default: every protection module",
    )
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="OPERATOR:LINE",
        help="only the mutants this operator makes on this line, e.g. core/AddNot:118, as a survivor "
        "is printed (repeatable; with one --module)",
    )
    args = parser.parse_args(argv)
    if args.only and len(args.module or ()) != 1:
        parser.error("--only needs exactly one --module")
    # A plain `kill` unwinds like Ctrl-C, so the scratch copy is removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    equivalents = read_equivalents()
    started = time.monotonic()
    results = {}
    for module in args.module or list(MODULES):
        module_started = time.monotonic()
        results[module] = run_module(module, equivalents, frozenset(args.only))
        print(f"{module}: done in {time.monotonic() - module_started:.0f} s", flush=True)
    print_scores(results)
    print(f"\ntotal time {time.monotonic() - started:.0f} s")
    for module, outcomes in results.items():
        for kind in ("survived", "error"):
            for m in outcomes[kind]:
                print(f"\n{kind.upper()} {module}:{m.line_no} {m.operator}: {m.line}\n{m.diff or m.output[-2000:]}")
    for e in [] if args.only else _stale(equivalents, results):  # --only makes a few mutants: no entry is stale
        print(f"\nstale entry in {EQUIVALENT_FILE.name} (matches no mutant): {e.module} | {e.operator} | {e.line}")
    return 1 if any(o["survived"] or o["error"] for o in results.values()) else 0
