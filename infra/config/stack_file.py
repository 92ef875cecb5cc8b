"""Read a `Pulumi.<stack>.yaml` the way the engine hands its config to the program, without an engine; which stack's:
the one named, else the one `pulumi` has selected here."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import yaml

from workload.core.config import ConfigError


def read_stack_config(path: Path) -> dict[str, str]:
    """Fully qualified keys to values: objects as JSON text, scalars as text. Encrypted secrets are left out
    (nothing here can decrypt them, and nothing here should compare them)."""
    try:
        document = yaml.safe_load(path.read_text()) or {}
    except OSError as error:
        raise ConfigError(
            str(path), f"cannot be read ({error.strerror})", "pass an existing Pulumi.<stack>.yaml"
        ) from None
    except yaml.YAMLError as error:
        where = getattr(error, "problem_mark", None)
        line = f" at line {where.line + 1}" if where else ""
        raise ConfigError(
            str(path), f"is not valid YAML{line}", "fix the file, or pass another Pulumi.<stack>.yaml"
        ) from None
    if not isinstance(document, dict):
        raise ConfigError(str(path), "is not a stack config file (no mapping at the top)", "pass a Pulumi.<stack>.yaml")
    return {
        k: v if isinstance(v, str) else json.dumps(v)
        for k, v in (document.get("config") or {}).items()
        if not (isinstance(v, dict) and "secure" in v)
    }


def selected_stack(cwd: Path) -> str:
    """The stack `pulumi` acts on here without --stack (`pulumi stack --show-name`), asked with stdin closed so that it
    never prompts; a `ConfigError` where none is selected or the CLI cannot answer."""
    fix = (
        "pulumi stack select NAME (pulumi stack ls lists them; pulumi stack init NAME makes one), or pass --stack NAME"
    )
    try:
        done = subprocess.run(
            ["pulumi", "stack", "--show-name"],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise ConfigError("the stack", f"cannot be asked of the pulumi CLI ({type(error).__name__})", fix) from None
    name = done.stdout.strip()
    if done.returncode != 0 or not name:
        said = (done.stderr.strip().splitlines() or ["no stack selected"])[-1].removeprefix("error: ")
        raise ConfigError("the stack", f"none is selected ({said})", fix)
    return name


def chosen_stack_file(root: Path, stack: str | None) -> Path:
    """`Pulumi.<stack>.yaml` in `root`, for `stack` or else the selected stack: the stack the user chose, never
    Pulumi.dev.yaml unless it is that one."""
    return root / f"Pulumi.{stack or selected_stack(root)}.yaml"
