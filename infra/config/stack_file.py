"""Read a `Pulumi.<stack>.yaml` the way the engine hands its config to the program, without an engine."""

from __future__ import annotations

import json
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
