"""The post-deploy pipeline as phases, and exactly which settings each one depends on.

`phase_inputs` is the one source of truth for both `__main__.py` (each phase's pulumi-command `triggers`)
and `python -m infra.plan` (which phases a config change re-runs, and why). A phase depends on its own
settings and on everything the phases before it depend on, so a change re-runs its phase and the ones
after it, never the ones before.
"""

from __future__ import annotations

from typing import Any

from workload.config import PipelineConfig

PHASES = ("bootstrap", "convert", "train", "export")

# The pipeline settings each phase reads itself (stack keys without the namespace).
OWN_INPUTS: dict[str, tuple[str, ...]] = {
    "bootstrap": ("maxtextVersion", "installPostTrainExtras", "torchBackend"),
    "convert": ("model", "profile"),
    "train": (
        "steps", "perDeviceBatchSize", "dataset", "trainSplit", "trainDataColumns", "learningRate",
        "maxTargetLength", "checkpointPeriod", "runName", "acceleratorType",
    ),
    "export": (),  # export, verify and keep read only what training produced
}


def phase_inputs(pipeline: PipelineConfig) -> dict[str, dict[str, Any]]:
    """For each phase, the settings whose change must re-run it, with their values."""
    values = pipeline.to_mapping()
    inputs: dict[str, dict[str, Any]] = {}
    accumulated: dict[str, Any] = {}
    for phase in PHASES:
        accumulated = {**accumulated, **{key: values[key] for key in OWN_INPUTS[phase]}}
        inputs[phase] = dict(sorted(accumulated.items()))
    return inputs
