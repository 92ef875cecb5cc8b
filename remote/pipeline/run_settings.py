"""The run's whole settings, handed from the Pulumi program to the phase task that starts the run.

The run on the host goes from convert to keep, but a phase task's inputs are only the settings of its phase and
the ones before it (infra/phases.py): convert's task cannot be given train's settings without a `steps` change
re-running convert. So the program, while `pulumi up` updates (never in a preview), writes every pipeline setting
to a file in the project directory, named by the convert settings it extends; the task reads it and starts the run
with them when they agree with its own inputs. Without that file (a task run by hand, or on another machine than
the `pulumi up` that evaluated the program) a task starts a run that ends with its own phase, and the next task
starts the rest. Two stacks of one checkout with the same convert settings share the file: the one whose
`pulumi up` wrote last is read, and a later task whose own settings the run does not match restarts it
(remote/pipeline/claim.py). Standard library and workload/core only: infra/tasks.py imports it.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from workload.core.config import ConfigError, PipelineConfig
from workload.core.contract import PHASES

# Relative to the project directory, where `pulumi up` runs the program and its tasks.
RUN_SETTINGS_DIR = ".tpu-sft/run-settings"
# Another directory for them, in the environment of the program and its tasks alike: the tests give each of their
# processes its own, so that no test reads what another's program wrote.
DIR_ENV = "TPU_SFT_RUN_SETTINGS_DIR"


def path_for(pipeline: PipelineConfig) -> Path:
    """The file of the runs whose convert settings are these."""
    convert = json.dumps(pipeline.phase_settings("convert"), sort_keys=True)
    directory = Path(os.environ.get(DIR_ENV) or RUN_SETTINGS_DIR)
    return directory / f"{hashlib.sha256(convert.encode()).hexdigest()[:16]}.json"


def record(pipeline: PipelineConfig) -> None:
    """Write every pipeline setting where a task with the same convert settings finds them (whole or not at all)."""
    path = path_for(pipeline)
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    temporary.write_text(json.dumps(pipeline.phase_settings(PHASES[-1]), sort_keys=True) + "\n")
    temporary.replace(path)


def whole_run(phase: str, own: PipelineConfig) -> PipelineConfig | None:
    """The run's whole settings, where the program recorded them and they agree with `phase`'s own; else None."""
    try:
        raw = json.loads(path_for(own).read_text())
        recorded = PipelineConfig.from_mapping(raw) if isinstance(raw, dict) else None
    except (OSError, ValueError, ConfigError):
        return None
    if recorded is None:
        return None
    return recorded if recorded.phase_settings(phase) == own.phase_settings(phase) else None
