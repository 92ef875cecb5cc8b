"""What one `python -m remote phase NAME` run is asked to do, read from its environment: the phase, the target
(with its host profile) and the pipeline settings that phase depends on."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Mapping

from remote.pipeline.bootstrap.seed import EVAL_VENV, spec_for
from remote.pipeline.bootstrap.spec import BootstrapSpec
from remote.pipeline.target import PipelineTarget
from remote.ssh.errors import BadInput
from workload.core.config import ConfigError, PipelineConfig
from workload.core.contract import PHASES, PIPELINE_ENV


@dataclass(frozen=True)
class PhaseRequest:
    phase: str
    target: PipelineTarget
    pipeline: PipelineConfig

    @classmethod
    def from_env(cls, phase: str, target: PipelineTarget, env: Mapping[str, str]) -> "PhaseRequest":
        if phase not in PHASES:
            raise BadInput(f"phase {phase!r} is not one of {', '.join(PHASES)}")
        if not env.get(PIPELINE_ENV):
            raise BadInput(f"${PIPELINE_ENV} is not set: give the pipeline settings as PipelineConfig JSON")
        try:
            pipeline = PipelineConfig.from_mapping(json.loads(env[PIPELINE_ENV]))
        except json.JSONDecodeError as e:
            raise BadInput(f"${PIPELINE_ENV} is not valid JSON ({e.msg}); give PipelineConfig JSON") from None
        except ConfigError as e:
            raise BadInput(f"${PIPELINE_ENV}: {e}") from None
        request = cls(phase=phase, target=target, pipeline=pipeline)
        request.bootstrap_spec()  # a profile's malformed install fails here, before any connection
        return request

    @property
    def work_dir(self) -> str:
        return self.target.profile.scratch_dir

    @property
    def output_dir(self) -> str:
        return self.target.profile.kept_dir

    @property
    def venv(self) -> str:
        """Where MaxText is installed on the host: with everything else of tpu-sft, under its state dir."""
        return f"{self.target.state_dir}/maxtext_venv"

    @property
    def eval_venv(self) -> str:
        """Where the eval venv (vLLM TPU, lm-eval) is installed on the host, beside the MaxText venv."""
        return f"{self.target.state_dir}/{EVAL_VENV}"

    def bootstrap_spec(self) -> BootstrapSpec:
        """The profile's install, or the seed's for these settings."""
        custom = self.target.profile.bootstrap
        return (
            BootstrapSpec.from_mapping(custom)
            if custom is not None
            else spec_for(
                self.pipeline,
                venv=self.venv,
                eval_venv=self.eval_venv,
                work_dir=self.target.profile.scratch_dir,
                state_dir=self.target.state_dir,
            )
        )

    @property
    def job_prefix(self) -> str:
        """Same settings, same job: what lets a re-run find (and not repeat) the work of an earlier one."""
        settings = self.pipeline.phase_settings(self.phase)
        digest = hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()
        return f"{self.phase}-{digest[:16]}"
