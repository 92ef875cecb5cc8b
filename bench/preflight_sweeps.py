"""The full gemma3-4b preflight on the TPU compiler, here without a TPU: the batch sweep of the example stack
(`Pulumi.dev.yaml`) for a v6e-8 and for a v6e-16 slice, each compile's memory per chip, bounds and compile time.

    .venv/bin/python -m bench.preflight_sweeps

It runs `scripts/preflight --sweep` twice, as a user would (the v6e-16 with what a slice needs besides: autostop off,
the data-disk keys are ignored), and prints each sweep's table and the minutes it took. Compiles are remembered by
their train inputs (.tpu-sft/preflight/), so run it on a clean clone to measure them: ~20 min a sweep on 2 cores.
The README's tables ("Does it fit?") are this command's output, with their dates and commits.
"""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
STACKS = {
    "v6e-8": [],
    "v6e-16": ["tpu-sft:acceleratorType=v6e-16", "tpu-sft:autostop=off"],
}


def main() -> int:
    for accelerator, overrides in STACKS.items():
        started = time.monotonic()
        done = subprocess.run([str(REPO / "scripts" / "preflight"), "--sweep", "Pulumi.dev.yaml", *overrides], cwd=REPO)
        minutes = (time.monotonic() - started) / 60
        print(f"\n{accelerator}: sweep exited {done.returncode} after {minutes:.1f} min\n", flush=True)
        if done.returncode not in (0, 1):
            return done.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
