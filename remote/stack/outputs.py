"""What the stack says about itself: its outputs, read with the `pulumi` CLI (`pulumi stack output --json`), never
with Pulumi's SDK (remote/ imports none of it). Secret outputs stay "[secret]": nothing here needs one.

The outputs used: `target` (the JSON target every post-deploy task gets in $TPU_SFT_TARGET: hosts, login, key *path*,
profile), `project`, `zone`, `instanceName` (one VM) or `instanceGroupName` (a slice), `checkpointsUrl`, and `modelDir`
once a `pulumi up` has seen the export finish.

`pulumi` runs with stdin closed and its output captured, so it never prompts: on a stack whose secrets provider is a
passphrase it needs PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE, as `pulumi up` does, and otherwise
fails with its passphrase manager's own words (pulumi/pulumi pkg/secrets/passphrase/manager.go), which `_said` turns
into one line naming both variables. The passphrase is never printed: pulumi does not print it, and in those cases
nothing of what pulumi said is shown.
"""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from typing import Any

from remote.pipeline.target import PipelineTarget
from remote.ssh.errors import EXIT_BAD_INPUT, EXIT_NOT_FOUND, RemoteError, TargetError

PULUMI_TIMEOUT_S = 120.0
BOTH = "PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE"
# What the passphrase manager says, whatever wraps it (the wrapping differs between releases and backends): no
# passphrase (the newer words, then those of releases 3.2 to 3.x), one that is not the stack's, an unreadable file.
NO_PASSPHRASE = (
    "passphrase must be set with PULUMI_CONFIG_PASSPHRASE",
    "unable to find either `PULUMI_CONFIG_PASSPHRASE`",
)
WRONG_PASSPHRASE = "incorrect passphrase"
UNREADABLE_FILE = "unable to read PULUMI_CONFIG_PASSPHRASE_FILE"


class StackError(RemoteError):
    """The stack cannot answer (no CLI, no stack, nothing deployed yet); one line that says what to do."""

    exit_code = EXIT_BAD_INPUT


class NothingDeployed(StackError):
    exit_code = EXIT_NOT_FOUND


@dataclass(frozen=True)
class StackOutputs:
    stack: str  # as the user named it; "" for the selected stack
    values: dict[str, Any]

    @property
    def shown(self) -> str:
        return f"stack {self.stack}" if self.stack else "the selected stack"

    def target(self) -> PipelineTarget:
        raw = self.values.get("target")
        if not raw:
            raise NothingDeployed(f"{self.shown} has no VM yet (no `target` output): run `pulumi up` first")
        try:
            return PipelineTarget.from_json(raw)
        except TargetError as error:
            raise StackError(
                f"{self.shown}'s `target` output is not a target ({error}); run `pulumi up` again"
            ) from None

    def text(self, name: str) -> str | None:
        value = self.values.get(name)
        return value if isinstance(value, str) and value and value != "[secret]" else None


def read(stack: str | None = None, *, cwd: str | None = None) -> StackOutputs:
    """The outputs of `stack` (None: the selected one), as `pulumi stack output --json` prints them."""
    argv = ["pulumi", "stack", "output", "--json", *(["--stack", stack] if stack else [])]
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=PULUMI_TIMEOUT_S, cwd=cwd, stdin=subprocess.DEVNULL
        )
    except FileNotFoundError:
        raise StackError(
            "the pulumi CLI is not on PATH: install it (pulumi.com/docs/install) or run this where `pulumi up` runs"
        ) from None
    except subprocess.TimeoutExpired:
        raise StackError(f"`pulumi stack output` did not answer in {PULUMI_TIMEOUT_S:.0f} s; try again") from None
    if done.returncode != 0:
        raise StackError(_said(done.stderr, stack))
    try:
        values = json.loads(done.stdout or "{}")
    except json.JSONDecodeError:
        raise StackError(
            "`pulumi stack output --json` printed something that is not JSON; is `pulumi` Pulumi?"
        ) from None
    if not isinstance(values, dict):
        raise StackError("`pulumi stack output --json` printed no JSON object; is `pulumi` Pulumi?")
    return StackOutputs(stack or "", values)


def _said(stderr: str, stack: str | None) -> str:
    """One line for a `pulumi stack output` that failed: what pulumi said, and what to do."""
    shown = f"stack {stack}" if stack else "the selected stack"
    if any(words in stderr for words in NO_PASSPHRASE):
        return (
            f"{shown} keeps its secrets under a passphrase, which `pulumi stack output` needs: set {BOTH} (a file "
            "holding it) in this shell, as for `pulumi up`, and run this again"
        )
    if WRONG_PASSPHRASE in stderr:
        return f"the passphrase that {BOTH} gives is not {shown}'s: give the one `pulumi up` uses, and run this again"
    if UNREADABLE_FILE in stderr:
        return (
            f"pulumi cannot read the file PULUMI_CONFIG_PASSPHRASE_FILE names: point it at the file holding {shown}'s "
            "passphrase (or set PULUMI_CONFIG_PASSPHRASE), and run this again"
        )
    said = (stderr.strip().splitlines() or ["no output"])[-1].removeprefix("error: ")
    where = f"--stack {stack}" if stack else "a stack selected (`pulumi stack select`) or --stack NAME"
    return f"pulumi could not read the stack's outputs ({said}); run this in the project directory, with {where}"
