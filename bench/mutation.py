"""Mutation testing of the protection modules: would a test notice if a protection were removed?

Each module of MODULES is mutated with cosmic-ray, one mutant at a time, and only its own fast test subset runs
against each mutant (a fresh pytest process: the remote tests start their own sshd servers). A mutant is
  killed      a test failed
  survived    every test passed: a protection no test notices (or an equivalent mutant not yet listed)
  equivalent  listed in bench/mutation-equivalent.txt with the reason no behaviour can tell it apart
  timeout     the tests ran past the limit (counted as killed by cosmic-ray; shown apart here)
The mutants are made in a scratch copy of the tree, never in the working tree, so an interrupted run leaves no
mutant behind. Sessions are kept in .cache/mutation/<module>.sqlite (`cr-report`, `cr-html` read them).

Run (as root: the remote tests start sshd):
  nice -n 10 .venv/bin/python -m bench.mutation                          every module, then the scores
  nice -n 10 .venv/bin/python -m bench.mutation --module remote/jobs.py  one module
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
from dataclasses import dataclass
from pathlib import Path

import cosmic_ray.plugins
from cosmic_ray.ast import ast_nodes, get_ast_from_path
from cosmic_ray.ast.ast_query import ASTQuery
from cosmic_ray.mutating import mutate_and_test
from cosmic_ray.testing import run_tests
from cosmic_ray.work_db import WorkDB, use_db
from cosmic_ray.work_item import MutationSpec, WorkerOutcome, WorkItem, WorkResult

from bench.mutation_operators import ProtectionOperators

REPO = Path(__file__).resolve().parents[1]
EQUIVALENT_FILE = REPO / "bench" / "mutation-equivalent.txt"
SESSIONS = REPO / ".cache" / "mutation"
PROVIDER = "tpu-sft"


@dataclass(frozen=True)
class Target:
    tests: tuple[str, ...]  # the fast subset that covers the module
    # The functions and classes that hold its protections ("<module>": its module-level code), where the
    # module also holds other work (progress, polling and retry timing). Empty: the whole module.
    scope: tuple[str, ...] = ()

    def covers(self, definition: str | None) -> bool:
        return not self.scope or (definition or "<module>") in self.scope


MODULES = {
    # every file mode of a job, its secret.env, the job id that becomes a path, and claiming (mv -T)
    "remote/jobs.py": Target(("tests/remote/test_remote_jobs.py", "tests/remote/test_remote_secrets.py",
                              "tests/remote/test_remote_injection.py"),
                             ("check_job_id", "job_dir", "jobs_root", "status", "start", "_parse_status")),
    # host-key policy, what is offered and inherited, timeouts, environment quoting
    "remote/connection.py": Target(("tests/remote/test_remote_connection.py", "tests/remote/test_remote_injection.py")),
    # the markers and fingerprint that make a bootstrap run each step once
    "remote/bootstrap.py": Target(("tests/remote/test_remote_bootstrap.py",),
                                  ("BootstrapSpec", "step_hashes", "fingerprint", "from_json", "from_mapping", "__post_init__",
                                   "is_current", "bootstrap")),
    # modes kept on upload, downloads verified by size and sha256
    "remote/sync.py": Target(("tests/remote/test_remote_sync.py",)),
    # the HF token: a 0600 file in a 0700 directory, written over SFTP
    "remote/secrets.py": Target(("tests/remote/test_remote_secrets.py",
                                 "tests/remote/test_remote_cli.py::test_put_secret_stores_the_token_0600_without_printing_it")),
    "infra/network.py": Target(("tests/unit/test_firewall_and_disk.py",)),
    "infra/vm.py": Target(("tests/unit/test_vm.py", "tests/unit/test_firewall_and_disk.py")),
    "infra/settings.py": Target(("tests/unit/test_settings_errors.py", "tests/unit/test_firewall_and_disk.py")),
    "workload/config.py": Target(("tests/unit/test_settings_errors.py",)),
}

# cosmic-ray's core operators, with one replacement per arithmetic and comparison operator (its inverse or its
# boundary) instead of all eleven: in this code the others are killed by the same tests (strings and paths
# raise TypeError) and would multiply the run time by about six.
_BINARY = {"Add": "Sub", "Sub": "Add", "Mul": "Div", "Div": "Mul", "FloorDiv": "Mul", "Mod": "FloorDiv",
           "Pow": "Mul", "LShift": "RShift", "RShift": "LShift", "BitOr": "BitAnd", "BitAnd": "BitOr",
           "BitXor": "BitOr"}
_COMPARISON = {"Eq": ("NotEq",), "NotEq": ("Eq",), "Lt": ("LtE", "GtE"), "LtE": ("Lt", "Gt"),
               "Gt": ("GtE", "LtE"), "GtE": ("Gt", "Lt"), "Is": ("IsNot",), "IsNot": ("Is",),
               "In": ("NotIn",), "NotIn": ("In",)}
CORE_OPERATORS = (
    *(f"core/ReplaceBinaryOperator_{a}_{b}" for a, b in _BINARY.items()),
    *(f"core/ReplaceComparisonOperator_{a}_{b}" for a, bs in _COMPARISON.items() for b in bs),
    "core/ReplaceUnaryOperator_Delete_Not", "core/ReplaceUnaryOperator_USub_UAdd",
    "core/AddNot", "core/ReplaceTrueWithFalse", "core/ReplaceFalseWithTrue", "core/ReplaceAndWithOr",
    "core/ReplaceOrWithAnd", "core/ReplaceBreakWithContinue", "core/ReplaceContinueWithBreak",
    "core/ExceptionReplacer", "core/NumberReplacer", "core/RemoveDecorator", "core/ZeroIterationForLoop",
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
    line: str  # the mutated source line, stripped
    reason: str


def read_equivalents(path: Path = EQUIVALENT_FILE) -> list[Equivalent]:
    """`module | operator | source line | reason` per line; `#` starts a comment line."""
    entries = []
    for number, raw in enumerate(path.read_text().splitlines(), 1):
        if not raw.strip() or raw.lstrip().startswith("#"):
            continue
        fields = [f.strip() for f in raw.split(" | ", 3)]
        if len(fields) != 4 or not all(fields):
            sys.exit(f"{path}:{number}: expected `module | operator | source line | reason`")
        entries.append(Equivalent(*fields))
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


def work_items(module: str, target: Target):
    tree = get_ast_from_path(Path(module))
    for name in operator_names():
        operator = cosmic_ray.plugins.get_operator(name)()
        positions = ((node, start, end) for node in ast_nodes(tree) for start, end in operator.mutation_positions(node))
        for occurrence, (node, start, end) in enumerate(positions):
            definition = ASTQuery(node).get_definition_name()
            if _in_annotation(node) or _parameter_marker(node) or not target.covers(definition):
                continue
            spec = MutationSpec(module_path=module, operator_name=name, occurrence=occurrence, start_pos=start,
                                end_pos=end, definition_name=definition)
            yield WorkItem.single(job_id=f"{name}:{occurrence}", mutation=spec)


def _scratch_copy() -> Path:
    """The tree as git sees it (tracked and untracked, not ignored), with the project's venv linked in."""
    scratch = Path(tempfile.mkdtemp(prefix="tpu-sft-mutation-"))
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, check=True,
                           capture_output=True).stdout.decode().split("\0")
    for rel in filter(None, files):
        source = REPO / rel
        if source.is_file():
            (scratch / rel).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, scratch / rel)
    (scratch / ".venv").symlink_to(REPO / ".venv")
    return scratch


def _test_command(target: Target) -> str:
    return f"{REPO / '.venv/bin/python'} -m pytest -x -q -p no:cacheprovider " + " ".join(target.tests)


def run_module(module: str, equivalents: list[Equivalent], out=sys.stdout) -> dict[str, list]:
    """Mutate one module in a scratch copy; its outcomes: killed/survived/equivalent/timeout/error → items."""
    target = MODULES[module]
    SESSIONS.mkdir(parents=True, exist_ok=True)
    session = SESSIONS / (module.replace("/", "_").removesuffix(".py") + ".sqlite")
    session.unlink(missing_ok=True)
    scratch = _scratch_copy()
    here = os.getcwd()
    os.chdir(scratch)
    try:
        lines = Path(module).read_text().splitlines()
        started = time.monotonic()
        outcome, output = run_tests(_test_command(target), 600)
        baseline = time.monotonic() - started
        if outcome.value != "survived":
            sys.exit(f"{module}: its tests fail without any mutant; fix them first:\n{output[-3000:]}")
        timeout = 3 * baseline + 15
        with use_db(str(session), WorkDB.Mode.create) as db:
            db.clear()
            db.add_work_items(work_items(module, target))
            items = list(db.pending_work_items)
            print(f"{module}: {len(items)} mutants, tests {' '.join(target.tests)} ({baseline:.0f} s unmutated)",
                  file=out, flush=True)
            for n, item in enumerate(items, 1):
                spec = item.mutations[0]
                line = lines[spec.start_pos[0] - 1].strip()
                match = next((e for e in equivalents if (e.module, e.operator, e.line) == (module, spec.operator_name, line)), None)
                if match:
                    db.set_result(item.job_id, WorkResult(WorkerOutcome.SKIPPED, output=f"equivalent: {match.reason}"))
                    continue
                result = mutate_and_test(item.mutations, _test_command(target), timeout)
                db.set_result(item.job_id, result)
                if not result.is_killed:
                    print(f"  [{n}/{len(items)}] SURVIVED {spec.operator_name} line {spec.start_pos[0]}: {line}",
                          file=out, flush=True)
            return _outcomes(module, db, lines)
    finally:
        os.chdir(here)
        shutil.rmtree(scratch, ignore_errors=True)


def _outcomes(module: str, db: WorkDB, lines: list[str]) -> dict[str, list]:
    outcomes: dict[str, list] = {k: [] for k in ("killed", "survived", "equivalent", "timeout", "error")}
    for item, result in db.completed_work_items:
        spec = item.mutations[0]
        entry = (spec.operator_name, spec.start_pos[0], lines[spec.start_pos[0] - 1].strip(), result.diff or "")
        if result.worker_outcome == WorkerOutcome.SKIPPED:
            outcomes["equivalent"].append(entry)
        elif result.worker_outcome != WorkerOutcome.NORMAL:
            outcomes["error"].append(entry + (result.output or "",))
        elif result.output == "timeout":
            outcomes["timeout"].append(entry)
        elif result.is_killed:
            outcomes["killed"].append(entry)
        else:
            outcomes["survived"].append(entry)
    return outcomes


def _unused(equivalents: list[Equivalent], modules: list[str], seen: dict[str, dict[str, list]]) -> list[Equivalent]:
    """Listed equivalents that match no mutant any more: the code changed under them."""
    matched = {(m, op, line) for m in modules for op, _, line, _ in seen[m]["equivalent"]}
    return [e for e in equivalents if e.module in modules and (e.module, e.operator, e.line) not in matched]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--module", action="append", choices=sorted(MODULES),
                        help="mutate only this module (repeatable); default: every protection module")
    args = parser.parse_args(argv)
    # A plain `kill` unwinds like Ctrl-C, so the scratch copy is removed.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    modules = args.module or list(MODULES)
    equivalents = read_equivalents()
    started = time.monotonic()
    results = {}
    for module in modules:
        module_started = time.monotonic()
        results[module] = run_module(module, equivalents)
        counts = {k: len(v) for k, v in results[module].items()}
        print(f"{module}: {counts} in {time.monotonic() - module_started:.0f} s", flush=True)
    print(f"\n{'module':24} {'killed':>7} {'survived':>9} {'equivalent':>11} {'timeout':>8} {'error':>6}  score")
    for module, outcomes in results.items():
        c = {k: len(v) for k, v in outcomes.items()}
        judged = c["killed"] + c["timeout"] + c["survived"]
        score = f"{100 * (c['killed'] + c['timeout']) / judged:.0f}%" if judged else "-"
        print(f"{module:24} {c['killed']:7} {c['survived']:9} {c['equivalent']:11} {c['timeout']:8} {c['error']:6}  {score}")
    print(f"total time {time.monotonic() - started:.0f} s")
    for module, outcomes in results.items():
        for operator, line_no, line, diff in outcomes["survived"]:
            print(f"\nSURVIVED {module}:{line_no} {operator}: {line}\n{diff}")
        for operator, line_no, line, _, output in outcomes["error"]:
            print(f"\nERROR {module}:{line_no} {operator}: {line}\n{output[-2000:]}")
    for e in _unused(equivalents, modules, results):
        print(f"\nstale entry in {EQUIVALENT_FILE.name} (no such mutant any more): {e.module} | {e.operator} | {e.line}")
    return 1 if any(o["survived"] or o["error"] for o in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
