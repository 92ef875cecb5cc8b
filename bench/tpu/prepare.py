"""python -m bench.tpu.prepare: on a machine with network, what a TPU host without one needs to run the bench.

Writes into an ignored folder (default .tpu-bench/, which `run` of the device tool carries):
- wheels/: the wheels the host lacks, and the pure-Python ones its index has at another version than the lock's
  (bench/tpu/carried-wheels.txt, bench/tpu/packages.py), for CPython 3.11 on manylinux x86_64, each at
  workload/maxtext-requirements.txt's version; the two PyPI has only as sources are built with `pip wheel`;
- src/: the pinned MaxText's package (workload/maxtext-requirements.txt) and its dist-info, unpacked from PyPI's
  wheel, which pip refuses to install on Python 3.11 (it requires 3.12): the bench puts it on PYTHONPATH. Its
  tokenizers but Gemma 3's and its notebooks are left out (11 MB instead of ~120).
- with `--maxtext VERSION`, only src-VERSION/: another release's source the same way, for cases that name it
  (`release` in bench/tpu/cases.py); the carried wheels stay the pinned release's.

Runs with any Python that has pip; ~15 s with a warm pip cache. Run it again to refresh: each folder is made anew.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from bench.tpu import packages
from workload.core import lock

DEFAULT_DIR = Path(".tpu-bench")
MAXTEXT = "maxtext"
# pip matches a manylinux tag exactly: these are the ones the carried wheels are published under.
PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_17_x86_64", "manylinux2014_x86_64")
_KEPT_TOKENIZER = "tokenizer.gemma3"


def carried() -> list[tuple[str, bool]]:
    """(name==version, built from source) for each wheel carried to the host, at the lock's version."""
    pins = lock.versions()
    return [(f"{name}=={pins[name]}", build) for name, build in packages.carried()]


def _pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", *args], check=True)


def wheels(into: Path) -> None:
    binary = [pin for pin, build in carried() if not build]
    platforms = [arg for platform in PLATFORMS for arg in ("--platform", platform)]
    _pip(
        "download",
        "--no-deps",
        "--only-binary=:all:",
        "--python-version",
        "3.11",
        "--implementation",
        "cp",
        *platforms,
        "-d",
        str(into),
        *binary,
    )
    for pin, build in carried():
        if build:
            _pip("wheel", "--no-deps", "-w", str(into), pin)


def unmet(wheels: list[Path]) -> list[str]:
    """Each requirement of a carried wheel that what the host will have does not meet: the carried wheels at the lock's
    versions and host-index.txt's at the index's, on CPython 3.11 for Linux x86_64 (the bench installs with --no-deps,
    and some packages check at import: transformers its tokenizers). The lock's own overrides are its choice."""
    from packaging.requirements import Requirement
    from packaging.utils import canonicalize_name
    from packaging.version import Version

    pins = lock.versions()
    having = {canonicalize_name(n): v for n, (v, _) in packages.host_index().items()}
    having |= {canonicalize_name(n): pins[n] for n, _ in packages.carried()}
    overridden = {canonicalize_name(n) for n in lock.OVERRIDES}
    host = {"python_version": "3.11", "python_full_version": "3.11.7", "sys_platform": "linux", "extra": ""}
    said = []
    for wheel in wheels:
        with zipfile.ZipFile(wheel) as archive:
            [metadata] = [m for m in archive.namelist() if m.endswith(".dist-info/METADATA")]
            lines = archive.read(metadata).decode().splitlines()
        for line in lines:
            if not line.startswith("Requires-Dist:"):
                continue
            requirement = Requirement(line.removeprefix("Requires-Dist:").strip())
            name = canonicalize_name(requirement.name)
            if requirement.marker is not None and not requirement.marker.evaluate(host):
                continue
            if name in having and name not in overridden and Version(having[name]) not in requirement.specifier:
                said.append(f"{wheel.name} needs {requirement}, and the host will have {name} {having[name]}")
    return said


def source_dir(prepared: Path, release: str | None) -> Path:
    """Where a release's source is unpacked: src/ for the pinned one, src-VERSION/ for another."""
    return prepared / ("src" if release in (None, lock.versions()[MAXTEXT]) else f"src-{release}")


def maxtext_source(into: Path, version: str | None = None) -> None:
    version = version or lock.versions()[MAXTEXT]
    with tempfile.TemporaryDirectory() as download:
        # Its wheel is pure Python; only its metadata asks for 3.12.
        _pip(
            "download",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.12",
            "-d",
            download,
            f"{MAXTEXT}=={version}",
        )
        [wheel] = Path(download).glob(f"{MAXTEXT}-{version}-*.whl")
        with zipfile.ZipFile(wheel) as archive:
            for member in archive.namelist():
                if _kept(member):
                    archive.extract(member, into)


def _kept(member: str) -> bool:
    parts = member.split("/")
    if "notebooks" in parts:
        return False
    if parts[1:3] == ["assets", "tokenizers"] and len(parts) > 3:
        return parts[3] == _KEPT_TOKENIZER
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tpu.prepare", description=__doc__.split("\n\n")[0])
    parser.add_argument("--dir", type=Path, default=DEFAULT_DIR, help=f"where to write (default {DEFAULT_DIR})")
    parser.add_argument("--maxtext", metavar="VERSION", help="unpack only this release's source, as src-VERSION")
    args = parser.parse_args(argv)
    if args.maxtext:
        steps = [(source_dir(args.dir, args.maxtext), lambda folder: maxtext_source(folder, args.maxtext))]
    else:
        steps = [(args.dir / "wheels", wheels), (args.dir / "src", maxtext_source)]
    for folder, make in steps:
        shutil.rmtree(folder, ignore_errors=True)
        folder.mkdir(parents=True)
        make(folder)
        size = sum(f.stat().st_size for f in folder.rglob("*") if f.is_file())
        print(f"{folder}: {size / 2**20:.1f} MiB", flush=True)
    if not args.maxtext:  # the wheels were made anew
        said = unmet(sorted((args.dir / "wheels").glob("*.whl")))
        for line in said:
            print(f"bench/tpu/prepare: {line}. Fix: carry it (bench/tpu/carried-wheels.txt)", file=sys.stderr)
        return 1 if said else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
