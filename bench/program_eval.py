"""How long `pulumi preview`'s program evaluation takes, relative to importing the provider SDKs it uses.

Each sample is a fresh interpreter (imports dominate, and a warm one would hide them), alternating the two
cases so machine noise hits both alike. The program runs under the Pulumi SDK's mock engine with the shipped
Pulumi.dev.yaml, with every socket connect attempt recorded: the run must open no network connection.

    .venv/bin/python -m bench.program_eval [--samples 5]

Target: ratio ≤ 1.5.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# Loading the classes, not just the lazy package: `import pulumi_gcp.compute` alone defers the real work.
BARE_IMPORT = (
    "import pulumi; from pulumi_gcp.compute import Disk, Firewall, Instance; from pulumi_command.local import Command"
)

PROGRAM = """
import json, os, socket, sys
attempts = []
_connect = socket.socket.connect
def _record(self, address):
    attempts.append(repr(address))
    raise OSError("network disabled by the benchmark")
socket.socket.connect = _record
socket.socket.connect_ex = _record
sys.path.insert(0, {root!r})
from infra.config.stack_file import read_stack_config
from rehearsal.engine import ROOT, run_program
stack = run_program(read_stack_config(ROOT / "Pulumi.dev.yaml"))
print(json.dumps({{"resources": len(stack.resources), "outputs": len(stack.outputs), "connects": attempts}}))
"""


def _timed(code: str, home: str) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env={"HOME": home, "PATH": "/usr/bin:/bin"},
    )
    return time.perf_counter() - start, done.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=5)
    samples = parser.parse_args().samples
    with tempfile.TemporaryDirectory() as home:
        Path(home, ".ssh").mkdir()
        subprocess.run(
            ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", f"{home}/.ssh/google_compute_engine"], check=True
        )
        program = PROGRAM.format(root=str(ROOT))
        bare, full, report = [], [], {}
        for _ in range(samples):
            bare.append(_timed(BARE_IMPORT, home)[0])
            seconds, out = _timed(program, home)
            full.append(seconds)
            report = json.loads(out.strip().splitlines()[-1])
    b, f = statistics.median(bare), statistics.median(full)
    print(f"bare import of provider SDKs   median {b:6.2f} s  ({samples} samples)")
    print(
        f"program evaluation under mocks median {f:6.2f} s  "
        f"({report['resources']} resources, {report['outputs']} outputs)"
    )
    print(f"ratio                          {f / b:6.2f}   (target ≤ 1.5)")
    print(f"network connections attempted  {len(report['connects'])}")
    return 0 if f / b <= 1.5 and not report["connects"] else 1


if __name__ == "__main__":
    sys.exit(main())
