"""`scripts/preflight --data`: the dataset checked from the stack's side, before any VM exists (docs/data.md).

First what `pulumi preview` itself checks (infra/local_data.py: local files exist, JSON Lines rows are
conversations); then `python -m workload.preflight.data` in .maxtext-venv (or `$PREFLIGHT_PYTHON`) on the settings
as the user gave them (local paths, a share), which reads a bounded sample with the model's tokenizer and asks the
Hub whether the token may download the model. The token is `$HF_TOKEN` of this process, handed on in the
environment only.
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from typing import Callable

from infra.local_data import resolve
from infra.settings import Settings


def check_data(settings: Settings, maxtext_python: Callable[[], str], cwd: str) -> int:
    """workload.preflight.data's exit status (0: nothing stops the run, 1: a finding does); ConfigError first for
    what the preview refuses, before MaxText's Python is even looked for."""
    resolve(settings.pipeline, settings.checkpoint_bucket)
    python = maxtext_python()
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="tpu-sft-data-") as file:
        json.dump(settings.pipeline.to_mapping(), file)
        file.flush()
        # Its findings (stderr), table and JSON line (stdout) pass through as they come.
        return subprocess.run([python, "-m", "workload.preflight.data", "--settings", file.name], cwd=cwd).returncode
