"""Which version of each package the bench trains with, against the lock (workload/maxtext-requirements.txt, what the
VM installs). Standard library only.

A TPU host's Python brings its own JAX, jaxlib and libtpu, and its package index other versions of much else. The
bench installs three kinds beside them (bench/tpu/on-host):
- the carried wheels (carried-wheels.txt), each at the lock's version: what the host lacks, and every pure-Python
  package whose version in the host's index is not the lock's (flax, optax, orbax-checkpoint, transformers …);
- from the host's index (host-index.txt), what is there at the lock's version, and the compiled packages, which the
  host must provide at its own version: each such line says so with a trailing `# compiled`.
So only the host's compiled packages differ from what the VM runs, and each results file records, per package, the
lock's version and the one this host imports (`compared`).
"""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

from workload.core import lock

HERE = Path(__file__).resolve().parent
COMPILED = "# compiled"  # a host-index.txt line's mark: the host's build, whatever the lock's version
THE_HOSTS = ("jax", "jaxlib", "libtpu")  # preinstalled on the host, never installed by the bench


def _lines(name: str) -> list[str]:
    return [line for line in (HERE / name).read_text().splitlines() if line.strip() and not line.startswith("#")]


def carried() -> list[tuple[str, bool]]:
    """(name, built from source) for each wheel carried to the host, at the lock's version."""
    return [(name, build == ["build"]) for name, *build in (line.split() for line in _lines("carried-wheels.txt"))]


def host_index() -> dict[str, tuple[str, bool]]:
    """name: (the version host-index.txt installs from the host's index, whether it is marked compiled)."""
    found = {}
    for line in _lines("host-index.txt"):
        requirement, _, mark = line.partition(" #")
        name, version = requirement.strip().split("==")
        found[name] = (version, f"#{mark}".strip() == COMPILED)
    return found


def imported(name: str) -> str | None:
    """The version of `name` this Python imports: the first on its path, as `import` finds it."""
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return None


def compared() -> dict[str, dict[str, str | None]]:
    """Per package the bench installs or the host provides: the lock's version and the one imported here."""
    names = sorted({*THE_HOSTS, "maxtext", *(name for name, _ in carried()), *host_index()})
    pins = lock.versions()
    return {name: {"lock": pins.get(name), "host": imported(name)} for name in names}


def differing(packages: dict[str, dict[str, str | None]]) -> list[str]:
    """`name host (lock L)` for each package imported at another version than the lock's."""
    return [
        f"{name} {v['host']} (lock {v['lock']})" for name, v in packages.items() if v["host"] and v["host"] != v["lock"]
    ]
