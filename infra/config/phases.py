"""Which settings each post-deploy phase depends on: derived from the settings table (workload/core/config.py).

`phase_inputs` feeds both `infra/resources/tasks.py` (each phase's environment and `triggers`) and `python -m
infra.plan` (which phases a config change re-runs, and why). A phase depends on its own settings and on everything the
phases before it depend on, so a change re-runs its phase and the ones after it, never the ones before. The VM
fingerprints its steps from the same `phase_settings`, so it re-runs exactly what this says.
"""

from __future__ import annotations

from typing import Any

from workload.core.config import SETTINGS, PipelineConfig
from workload.core.contract import PHASES

# The pipeline settings each phase reads itself (stack keys without the namespace).
OWN_INPUTS: dict[str, tuple[str, ...]] = {phase: tuple(s.key for s in SETTINGS if s.phase == phase) for phase in PHASES}


def phase_inputs(pipeline: PipelineConfig) -> dict[str, dict[str, Any]]:
    """For each phase, the settings whose change must re-run it, with their values."""
    return {phase: dict(sorted(pipeline.phase_settings(phase).items())) for phase in PHASES}
