"""Imports go one way (ARCHITECTURE.md, "Layers"): __main__ builds infra and runs remote as a CLI; remote knows
no Pulumi and ships workload; workload knows neither Fabric nor Pulumi; the SSH toolkit (remote/ssh) knows
nothing of the pipeline built on it (remote/pipeline). Inside workload/, remote/ and infra/ every import goes down
the floors of FLOORS, and no module imports itself back through others. Read from the source, so a new import
anywhere is seen, a function's own imports too."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.source_tree import parse

ROOT = Path(__file__).resolve().parents[1]
SSH_LIBRARIES = ("fabric", "invoke", "paramiko")
PULUMI = ("pulumi", "pulumi_gcp", "pulumi_command", "pulumi_random", "pulumi_policy")

# The floors of workload/, remote/ and infra/, lowest first: a module imports its own unit and units of lower floors
# only, never another unit of its floor or one above. A unit is a package (each of its modules) or one module; a
# package's `__init__` is `<package>.__init__`. Every module is in exactly one unit: a new package needs its floor.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("workload.__init__", "workload.core"),  # the standard library's part every layer imports
    ("workload.measure", "workload.spend", "workload.tiny"),
    # how each MaxText process starts and is watched; the benchmarks before and after (the rehearsal's server generates
    # through measure/)
    ("workload.launch", "workload.eval"),
    ("workload.run",),  # the resumable pipeline
    ("workload.__main__", "workload.publish"),  # the VM's two CLIs: the run, publishing
    ("workload.preflight",),  # the step's compile, off the VM; it reads settings as the run's CLI does
    ("remote.__init__", "remote.ssh"),  # the toolkit
    ("remote.exit_status", "remote.pipeline"),  # how both CLIs end; the phases over the toolkit
    ("remote.cli", "remote.stack"),  # `python -m remote`, `scripts/tpu-sft`
    ("remote.__main__",),
    ("infra.__init__", "infra.pricing"),  # the Pulumi side: prices and the run's estimate, which defaults derive from
    ("infra.config",),  # the stack's settings: the table, parsed and checked
    ("infra.preflight", "infra.resources"),  # the step compiled before any VM; what the program declares
    ("infra.plan", "infra.stack"),  # what a change costs and re-runs; the settings as the program uses them
    ("infra.outputs",),  # the stack's outputs, from all of the above
)
FLOORED = ("workload", "remote", "infra")


def imported(package: str, root: Path = ROOT) -> dict[str, set[str]]:
    """Each module of `package` (a folder of `root`) → the top two levels of every name it imports."""
    found = {}
    for path in sorted((root / package).rglob("*.py")):
        tree = parse(path)
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


def import_graph(packages: tuple[str, ...], root: Path = ROOT) -> dict[str, set[str]]:
    """Each module of `packages` (`a.b` for a/b.py, `a.__init__` for a/__init__.py) → the modules of `packages` it
    imports, wherever in it the import is."""
    paths = {
        ".".join(path.relative_to(root).with_suffix("").parts): path
        for package in packages
        for path in (root / package).rglob("*.py")
    }

    def module(name: str) -> str | None:
        return name if name in paths else f"{name}.__init__" if f"{name}.__init__" in paths else None

    graph = {}
    for name, path in paths.items():
        package = name.split(".")[:-1]
        targets: set[str | None] = set()
        for node in ast.walk(parse(path)):
            if isinstance(node, ast.Import):
                targets |= {module(alias.name) for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                above = package[: len(package) - node.level + 1] if node.level else []
                base = ".".join([*above, *([node.module] if node.module else [])])
                targets |= {module(f"{base}.{alias.name}") or module(base) for alias in node.names}
        graph[name] = {target for target in targets if target is not None and target != name}
    return graph


def unit_of(module: str, floors: tuple[tuple[str, ...], ...] = FLOORS) -> str | None:
    """The unit of FLOORS that holds `module`: the longest that is it or a package above it."""
    units = [unit for floor in floors for unit in floor if module == unit or module.startswith(unit + ".")]
    return max(units, key=len, default=None)


def back_edges(graph: dict[str, set[str]], floors: tuple[tuple[str, ...], ...] = FLOORS) -> list[str]:
    """Each import of another unit on the same floor or one above, as "importer -> imported"."""
    floor = {unit: level for level, units in enumerate(floors) for unit in units}
    found = []
    for importer, targets in sorted(graph.items()):
        for target in sorted(targets):
            source, dest = unit_of(importer, floors), unit_of(target, floors)
            if source is not None and dest is not None and source != dest and floor[dest] >= floor[source]:
                found.append(f"{importer} -> {target}")
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The modules that import themselves back through others, each cycle as the modules it passes (the graph's
    strongly connected components of more than one module)."""
    order: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found = []

    def visit(module: str) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if target not in order:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], order[target])
        if low[module] == order[module]:
            component: list[str] = []
            while not component or component[-1] != module:
                component.append(stack.pop())
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return found


GRAPH = import_graph(FLOORED)


def test_every_module_is_on_one_floor_and_every_unit_exists():
    assert [module for module in sorted(GRAPH) if unit_of(module) is None] == []
    units = [unit for floor in FLOORS for unit in floor]
    assert len(units) == len(set(units))
    assert [unit for unit in units if not any(m == unit or m.startswith(unit + ".") for m in GRAPH)] == []


def test_imports_go_down_the_floors():
    assert back_edges(GRAPH) == []


def test_no_module_imports_itself_back():
    assert cycles(GRAPH) == []


def test_the_checks_see_a_back_edge_a_peer_and_a_cycle(tmp_path):
    files = {
        "low/__init__.py": "",
        "low/a.py": "from high import b\n",  # back up a floor
        "low/c.py": "def f():\n    from . import a\n",  # its own unit: allowed, and the function's import is seen
        "high/__init__.py": "",
        "low/e.py": "",
        "high/b.py": "import low.e\nfrom low import a\n",  # down: allowed, but b and a import each other
        "side/__init__.py": "",
        "side/d.py": "import high.b\n",  # a peer on the same floor
    }
    for name, text in files.items():
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_text(text)
    floors = (("low",), ("high", "side"))
    graph = import_graph(("low", "high", "side"), tmp_path)
    assert graph["low.c"] == {"low.a"}
    assert back_edges(graph, floors) == ["low.a -> high.b", "side.d -> high.b"]
    assert cycles(graph) == [["high.b", "low.a"]]
