"""The stack's settings, built once: the one path from the stack's config to the frozen `Settings` the program uses.

    the engine's config → infra/config/read_settings.py `from_pulumi` (every key parsed and checked; epochs as tokens)
      → what they need outside the stack, asked from here (infra/config/google_checks.py): the token's access to the
        gated model, the reservation's mode against the provisioning model
      → perDeviceBatchSize auto: the configuration the sweep chose, and the choice in words
      (infra/preflight/compile_step.py) → refused where a preflight of these train inputs found that the step does not
      fit → a local dataset or chat template named by its copies in the bucket, and the copies to declare
        (infra/config/local_data.py)
      → refused where scripts/preflight --data found that this very data stops the run

Nothing after it reads the config again or changes a setting. Any refusal is the program's one-line error.
"""

from __future__ import annotations

import os
from dataclasses import replace

import pulumi

from infra.config import google_checks
from infra.config.local_data import resolve
from infra.config.read_settings import from_pulumi
from infra.config.settings import Settings
from infra.preflight.compile_step import refuse_a_known_misfit, sweep_choice, take_the_sweeps_batch
from infra.preflight.data_preflight import refuse_known_bad_data
from workload.core.config import ConfigError


def settings() -> Settings:
    """The current stack's settings, or `pulumi.RunError` with the one line that says what to fix."""
    try:
        parsed = from_pulumi()
        for unchecked in google_checks.check(parsed, os.environ):
            pulumi.log.warn(unchecked)
        return resolved(parsed)
    except ConfigError as error:
        raise pulumi.RunError(str(error)) from None


def resolved(parsed: Settings) -> Settings:
    """`parsed` as the program uses it: what scripts/preflight answered for it taken or refused, its local data named
    by the copies the VM reads."""
    chosen = take_the_sweeps_batch(parsed)
    refuse_a_known_misfit(chosen.pipeline)  # before anything is declared
    data = resolve(chosen.pipeline, chosen.checkpoint_bucket)
    refuse_known_bad_data(data.pipeline)
    return replace(chosen, pipeline=data.pipeline, sweep_choice=sweep_choice(parsed), data_uploads=data.uploads)
