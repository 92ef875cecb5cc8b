"""A stand-in for the `pulumi` CLI, for the tests of `scripts/tpu-sft` (remote/stack/): there is no Pulumi CLI on this
machine (PyPI has no packaged CLI; npm's `pulumi` package downloads it from get.pulumi.com when run, which this
machine cannot reach). `install` puts an executable `pulumi` on a PATH folder that answers one command the way
Pulumi's does:

    pulumi stack output --json [--stack NAME]
    pulumi stack --show-name

with the outputs a test gives it, per stack: those the mock engine recorded for the real program
(rehearsal/run.py `record`), secret ones shown as "[secret]" as Pulumi shows them without --show-secrets. A stack it
was not given fails as Pulumi does ("no stack named …", exit 255), and so does any other command.

A stack given a passphrase keeps its secrets with the passphrase secrets provider, and the stand-in asks for the
passphrase as the CLI's source does (pulumi/pulumi pkg/secrets/passphrase/manager.go, read 2026-12-05:
`readPassphrase`, `NewPromptingPassphraseSecretsManagerFromState`, `errorCrypter`), before any output:
- PULUMI_CONFIG_PASSPHRASE, when set at all (an empty one is a passphrase), else the file PULUMI_CONFIG_PASSPHRASE_FILE
  names (its content stripped; "unable to read PULUMI_CONFIG_PASSPHRASE_FILE: …" if it cannot be read);
- neither, on a terminal (stdin and stdout both): the prompt; neither, off one: "constructing secrets manager:
  passphrase must be set with PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE environment variables";
- a wrong one: the manager is made "locked", and reading the stack's state, whose secrets (the token task's outputs)
  it must decrypt, fails: "… failed to decrypt: incorrect passphrase, please set PULUMI_CONFIG_PASSPHRASE to the
  correct passphrase or set PULUMI_CONFIG_PASSPHRASE_FILE to a file containing the passphrase".
Each is printed as the CLI prints an error ("error: …" on stderr), with exit code 1: pkg/cmd/pulumi/cmd/exit_codes.go
maps an error of no special type to ExitCodeError (1; releases before that taxonomy exited 255). The wrapping in front
of the manager's own text differs between releases and backends; scripts/tpu-sft matches only the manager's text.
The passphrase itself is never printed.

Without --stack, `stack output` reads the selected stack (DEFAULT's outputs); with none given, as with none
selected, it says what the CLI says off a terminal. `stack --show-name` prints the stack a test selected, or, with
none selected, what the CLI says off a terminal
(pulumi/pulumi pkg/cmd/pulumi state.go `requireStack`: "no stack selected; please use `pulumi stack select` or
`pulumi stack init` to choose one").

What it does not do: no state, backend, login or project lookup; no selected-stack logic beyond a default stack
name; no other flag (`--show-secrets`, `--shell`, an output's name) and no other command; no real encryption (the
passphrase is compared, and kept in the test's own folder).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

OUTPUTS_FILE = "pulumi-standin-outputs.json"
DEFAULT = "(selected)"  # the stack `pulumi` uses without --stack
MISSING = "passphrase must be set with PULUMI_CONFIG_PASSPHRASE or PULUMI_CONFIG_PASSPHRASE_FILE environment variables"
INCORRECT = (
    "failed to decrypt: incorrect passphrase, please set PULUMI_CONFIG_PASSPHRASE to the correct passphrase or set "
    "PULUMI_CONFIG_PASSPHRASE_FILE to a file containing the passphrase"
)
EXIT_ERROR = 1  # ExitCodeError
NO_STACK = "no stack selected; please use `pulumi stack select` or `pulumi stack init` to choose one"


def install(
    bin_dir: Path,
    outputs: dict[str, dict[str, Any]],
    passphrases: dict[str, str] | None = None,
    selected: str | None = None,
) -> Path:
    """Writes `pulumi` into `bin_dir`, answering with `outputs` (stack name, or DEFAULT → outputs); a stack named in
    `passphrases` keeps its secrets under that passphrase; `selected` is the stack `stack --show-name` names."""
    from rehearsal.engine import plain  # here: each `pulumi` call would import Pulumi's SDK for nothing

    bin_dir.mkdir(parents=True, exist_ok=True)
    stacks = {name: {"outputs": plain(values)} for name, values in outputs.items()}
    for name, phrase in (passphrases or {}).items():
        stacks[name]["passphrase"] = phrase
    (bin_dir / OUTPUTS_FILE).write_text(json.dumps({"stacks": stacks, "selected": selected}))
    shim = bin_dir / "pulumi"
    root = Path(__file__).resolve().parents[2]
    shim.write_text(
        f"#!/bin/sh\ncd {json.dumps(str(root))} && exec {json.dumps(sys.executable)} -m tests.remote.pulumi_standin "
        f'{json.dumps(str(bin_dir / OUTPUTS_FILE))} "$@"\n'
    )
    shim.chmod(0o755)
    return bin_dir


def _passphrase() -> str:
    """The passphrase as `readPassphrase` finds it; ValueError with the manager's message where it finds none."""
    if "PULUMI_CONFIG_PASSPHRASE" in os.environ:
        return os.environ["PULUMI_CONFIG_PASSPHRASE"]
    if phrase_file := os.environ.get("PULUMI_CONFIG_PASSPHRASE_FILE"):
        path = os.path.abspath(phrase_file)
        try:
            return Path(path).read_text().strip()
        except OSError as error:
            raise ValueError(f"unable to read PULUMI_CONFIG_PASSPHRASE_FILE: open {path}: {error.strerror}") from None
    if sys.stdin.isatty() and sys.stdout.isatty():
        print("Enter your passphrase to unlock config/secrets", file=sys.stderr)
        return sys.stdin.readline().rstrip("\n")
    raise ValueError(MISSING)


def main(argv: list[str]) -> int:
    outputs_file, *args = argv
    recorded = json.loads(Path(outputs_file).read_text())
    if args == ["stack", "--show-name"]:
        if recorded["selected"] is None:
            print(f"error: {NO_STACK}", file=sys.stderr)
            return EXIT_ERROR
        print(recorded["selected"])
        return 0
    stack = DEFAULT
    if "--stack" in args:
        at = args.index("--stack")
        stack = args[at + 1]
        del args[at : at + 2]
    if args != ["stack", "output", "--json"]:
        answers = "`stack output --json [--stack NAME]` and `stack --show-name`"
        said = f"error: the pulumi stand-in answers {answers}, not {args}"
        print(said, file=sys.stderr)
        return 255
    stacks = recorded["stacks"]
    if stack == DEFAULT and DEFAULT not in stacks:  # no --stack, and none selected
        print(f"error: {NO_STACK}", file=sys.stderr)
        return EXIT_ERROR
    if stack not in stacks:
        print(f"error: no stack named '{stack}' found", file=sys.stderr)
        return 255
    if "passphrase" in stacks[stack]:
        try:
            given = _passphrase()
        except ValueError as error:
            print(f"error: constructing secrets manager: {error}", file=sys.stderr)
            return EXIT_ERROR
        if given != stacks[stack]["passphrase"]:
            print(f"error: could not deserialize deployment: decrypting secret value: {INCORRECT}", file=sys.stderr)
            return EXIT_ERROR
    print(json.dumps(stacks[stack]["outputs"], indent=4))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
