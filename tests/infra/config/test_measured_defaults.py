"""A stack given only the keys it cannot do without trains as the example stack does: the program's defaults are the
measured choice (MaxText's own loop at batch 4, docs/trainer.md "The defaults"), so Pulumi.dev.yaml's run settings
repeat them rather than rescue a user from them, and the preview of either stack shows the same run."""

from __future__ import annotations

import json

from tests.fixtures.mock_engine import COMMAND
from workload.core.config import BY_KEY, PipelineConfig
from workload.core.contract import PIPELINE_ENV, RUN_TASK

# What the program refuses to run without: where, the reservation RESERVATION_BOUND binds to, and the key the VM trusts.
REQUIRED = ("gcp:project", "gcp:zone", "tpu-sft:reservation", "tpu-sft:sshPublicKey")
# The preview's outputs that describe the run rather than where it runs (infra/outputs.py).
RUN_OUTPUTS = ("runLength", "throughput", "hourlyCostUsd", "estimatedRunHours", "estimatedRunCostUsd", "tpuPrice")


def _run_settings(stack) -> dict:
    """Every pipeline setting the run task hands the VM: the run as it will train."""
    (run,) = [r for r in stack.of_type(COMMAND) if r.name.endswith(f"-{RUN_TASK}")]
    return json.loads(run.inputs["environment"][PIPELINE_ENV])


def test_a_stack_of_the_required_keys_previews_the_example_stacks_run(mock_stack, dev_config):
    minimal = mock_stack(remove=tuple(k for k in dev_config if k not in REQUIRED))
    example = mock_stack()
    settings = _run_settings(minimal)
    assert (settings["trainer"], settings["perDeviceBatchSize"], settings["weightDtype"]) == ("native", 4, None)
    assert settings == _run_settings(example)
    assert {k: minimal.outputs[k] for k in RUN_OUTPUTS} == {k: example.outputs[k] for k in RUN_OUTPUTS}
    assert "step_predictions.json" in minimal.outputs["throughput"]["source"]  # the bench's table has this run


def test_the_example_stacks_run_settings_repeat_the_defaults(dev_config):
    """Each run setting Pulumi.dev.yaml sets is the program's default, spelled out."""
    set_in_example = {
        k.removeprefix("tpu-sft:"): v for k, v in dev_config.items() if k.removeprefix("tpu-sft:") in BY_KEY
    }
    defaults = PipelineConfig().to_mapping()
    assert PipelineConfig.from_mapping(set_in_example).to_mapping() == defaults
    assert {"trainer", "perDeviceBatchSize", "evalInterval", "evalSteps", "checkpointPeriod"} <= set(set_in_example)


def test_the_seeds_loop_and_batch_are_one_setting_each_away(mock_stack):
    seed = _run_settings(mock_stack({"tpu-sft:trainer": "tunix", "tpu-sft:perDeviceBatchSize": "1"}))
    assert (seed["trainer"], seed["perDeviceBatchSize"]) == ("tunix", 1)
