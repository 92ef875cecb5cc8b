"""What `pulumi up` leaves on screen of its post-deploy tasks, as pulumi-command 1.2.1 and the engine show them: the
stand-in the rehearsal's command runner shows its commands through.

Enforced, each read in pulumi-command's source at v1.2.1 (github.com/pulumi/pulumi-command, provider/pkg/provider):
- every line of a command's stdout and stderr is a status message (util/util.go `LogOutput`: `l.InfoStatus(msg)` per
  line of a `bufio.Scanner`), which Pulumi's progress display shows in the resource's Info column, each replacing the
  one before, and not in the final output (Pulumi's plugin-host docs, `LogStatus`): `StatusLine` keeps only the last;
- a failed command's error is `<exit error>: running "<command>":` followed by everything it wrote to stdout and
  stderr (local/commandOutputs.go `run`: `fmt.Errorf("%w: running %q:\\n%s", err, command, stdouterrbuf.String())`;
  Go's `exec.ExitError` reads `exit status N`): `failure`;
- what stays when `pulumi up` ends is its stack outputs and each resource's error (`end`).

Not enforced: how the engine lays the outputs out (indentation, quoting); the order in which a command's stdout and
stderr lines interleave in its error (here stdout, then stderr; the provider writes both into one buffer as they
come, which changes the order, not the count).
"""

from __future__ import annotations

import json
from typing import Any


class StatusLine:
    """A task's Info column: the last line it printed."""

    def __init__(self) -> None:
        self.text = ""

    def line(self, text: str) -> None:
        if text.strip():
            self.text = text.rstrip("\n")


def failure(create: str, returncode: int, stdout: str, stderr: str) -> str:
    """The error pulumi-command returns for a command that exited with `returncode`."""
    return f"exit status {returncode}: running {json.dumps(create)}:\n{stdout}{stderr}".rstrip("\n")


def end(outputs: dict[str, Any], errors: dict[str, str]) -> str:
    """What `pulumi up` prints last: the resources' errors (its Diagnostics) and the stack outputs of `phases`."""
    lines = []
    if errors:
        lines.append("Diagnostics:")
        for name, error in errors.items():
            lines.append(f"  command:local:Command ({name}):")
            lines.extend(f"    error: {line}" if i == 0 else f"    {line}" for i, line in enumerate(error.splitlines()))
    if outputs:
        lines.append("Outputs:")
        for name, value in outputs.items():
            if isinstance(value, dict):
                lines.append(f"    {name}: {{")
                lines.extend(f"        {key}: {json.dumps(item, ensure_ascii=False)}" for key, item in value.items())
                lines.append("    }")
            else:
                lines.append(f"    {name}: {json.dumps(value, ensure_ascii=False)}")
    return "\n".join(lines)
