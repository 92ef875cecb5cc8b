"""A stand-in for the `pulumi` CLI, for the tests of `scripts/tpu-sft` (remote/stack/): there is no Pulumi CLI on this
machine. `install` puts an executable `pulumi` on a PATH folder that answers one command the way Pulumi's does:

    pulumi stack output --json [--stack NAME]

with the outputs a test gives it, per stack: those the mock engine recorded for the real program
(rehearsal/run.py `record`), secret ones shown as "[secret]" as Pulumi shows them without --show-secrets. A stack it
was not given fails as Pulumi does ("no stack named …", exit 255), and so does any other command.

What it does not do: no state, backend, login or project lookup; no selected-stack logic beyond a default stack
name; no other flag (`--show-secrets`, `--shell`, an output's name) and no other command.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

OUTPUTS_FILE = "pulumi-standin-outputs.json"
DEFAULT = "(selected)"  # the stack `pulumi` uses without --stack


def install(bin_dir: Path, outputs: dict[str, dict[str, Any]]) -> Path:
    """Writes `pulumi` into `bin_dir`, answering with `outputs` (stack name, or DEFAULT → outputs)."""
    from rehearsal.engine import plain  # here: each `pulumi` call would import Pulumi's SDK for nothing

    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / OUTPUTS_FILE).write_text(json.dumps({name: plain(values) for name, values in outputs.items()}))
    shim = bin_dir / "pulumi"
    root = Path(__file__).resolve().parents[2]
    shim.write_text(
        f"#!/bin/sh\ncd {json.dumps(str(root))} && exec {json.dumps(sys.executable)} -m tests.remote.pulumi_standin "
        f'{json.dumps(str(bin_dir / OUTPUTS_FILE))} "$@"\n'
    )
    shim.chmod(0o755)
    return bin_dir


def main(argv: list[str]) -> int:
    outputs_file, *args = argv
    stack = DEFAULT
    if "--stack" in args:
        at = args.index("--stack")
        stack = args[at + 1]
        del args[at : at + 2]
    if args != ["stack", "output", "--json"]:
        said = f"error: the pulumi stand-in answers only `stack output --json [--stack NAME]`, not {args}"
        print(said, file=sys.stderr)
        return 255
    stacks = json.loads(Path(outputs_file).read_text())
    if stack not in stacks:
        print(f"error: no stack named '{stack}' found", file=sys.stderr)
        return 255
    print(json.dumps(stacks[stack], indent=4))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
