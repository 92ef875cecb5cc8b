"""`scripts/preflight --data`: the dataset checked from the stack's side, before any VM exists (docs/data.md), and
what `pulumi up` then refuses by.

First what `pulumi preview` itself checks (infra/config/local_data.py: local files exist, JSON Lines rows are
conversations); then `python -m workload.preflight.data` in .maxtext-venv (or `$PREFLIGHT_PYTHON`) on the settings
as the user gave them (local paths, a share), which reads a bounded sample with the model's tokenizer and asks the
Hub whether the token may download the model. The token is `$HF_TOKEN` of this process, handed on in the
environment only.

Its answer is kept as .tpu-sft/preflight/data-<fingerprint>.json, the fingerprint of the train phase's inputs but
the run's length, with local files named by their content hash (and the data's size in tokens apart, by the data
alone: infra/config/data_size.py): `pulumi up` (and preview) refuse a stack whose exact data a preflight
found a finding in (a split that does not exist, a gated model not granted), before anything is declared. A
changed file or setting is other inputs, which nothing refuses until a preflight of them says so.

With `public_only` (a pull request's test job, which holds no credentials) data that needs a credential is not
read, and the answer says why (`not_checked`); such an answer is printed for the plan comment, not kept.
Every answer printed carries `data_fingerprint`, for `python -m infra.plan --data` to show only the head's.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, Callable

from infra.config import data_size
from infra.config.local_data import resolve
from infra.config.settings import Settings
from workload.core.config import LENGTH_KEYS, ConfigError, PipelineConfig
from workload.run.fingerprint import fingerprint

CACHE = Path(".tpu-sft") / "preflight"  # beside the compile's records (infra/preflight/compile_step.py)


def data_fingerprint(resolved: PipelineConfig) -> str:
    """The train inputs but the run's length, which changes nothing the check reads: `epochs`, counted in this very
    check's size (infra/config/data_size.py), finds the same record as the tokens it becomes."""
    train = {key: value for key, value in resolved.phase_settings("train").items() if key not in LENGTH_KEYS}
    return fingerprint({"train": train, "check": "data"})


def record_path(resolved: PipelineConfig) -> Path:
    return CACHE / f"data-{data_fingerprint(resolved)}.json"


def check_data(
    settings: Settings, maxtext_python: Callable[[], str], cwd: str, public_only: bool = False, rows: int | None = None
) -> int:
    """workload.preflight.data's exit status (0: nothing stops the run, 1: a finding does); ConfigError first for
    what the preview refuses, before MaxText's Python is even looked for."""
    resolved = resolve(settings.pipeline, settings.checkpoint_bucket).pipeline
    python = maxtext_python()
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="tpu-sft-data-") as file:
        json.dump(settings.pipeline.to_mapping(), file)
        file.flush()
        argv = [python, "-m", "workload.preflight.data", "--settings", file.name]
        argv += ["--public-only"] if public_only else []
        argv += ["--rows", str(rows)] if rows is not None else []  # the sample's size: workload.preflight.data's own
        # Its findings pass through on stderr as they come; its table and JSON line are printed once it ends.
        done = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, text=True)
    lines = done.stdout.splitlines()
    if done.returncode not in (0, 1) or not lines:
        sys.stdout.write(done.stdout)
        return done.returncode
    answer = {**json.loads(lines[-1]), "data_fingerprint": data_fingerprint(resolved)}
    if not answer.get("not_checked"):
        keep(record_path(resolved), answer)
        data_size.keep(settings.pipeline, answer.get("epoch_tokens"), bool(answer.get("epoch_tokens_exact")))
    sys.stdout.write("".join(f"{line}\n" for line in lines[:-1]) + json.dumps(answer) + "\n")
    return done.returncode


def keep(path: Path, answer: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(answer, indent=1) + "\n")
    temporary.replace(path)  # whole or not at all: `pulumi up` reads it


def refuse_known_bad_data(resolved: PipelineConfig) -> None:
    """Raise the first finding a data preflight of exactly these train inputs kept, naming the record."""
    try:
        record = json.loads(record_path(resolved).read_text())
    except FileNotFoundError:
        return
    for finding in record["findings"][:1]:
        problem = f"{finding['problem']} (scripts/preflight --data, {record_path(resolved)})"
        raise ConfigError(finding["key"], problem, finding["fix"])
