"""The shipped dev stack, as the real program declares it under the mock engine, passes every mandatory rule."""

from policy.catalog import MANDATORY, check_stack
from policy.model import Resource


def _declared(stack):
    return [
        Resource(r.type, r.name, r.inputs, protect=r.protect, retain_on_delete=r.retain_on_delete)
        for r in stack.resources
    ]


def test_dev_stack_passes_mandatory_rules(mock_stack, dev_config):
    found = check_stack(_declared(mock_stack()), stack_config=dev_config)
    assert [v for v in found if v.level == MANDATORY] == []


def test_rules_see_a_broken_stack(mock_stack, dev_config):
    """The same check fails when the program is given a config the team forbids."""
    overrides = {
        "tpu-sft:allowDataDiskReplace": "false",
        "tpu-sft:keepDataDisk": "false",
        "tpu-sft:allowBucketReplace": "false",
    }
    found = check_stack(_declared(mock_stack(overrides)), stack_config={**dev_config, **overrides})
    assert {v.policy for v in found if v.level == MANDATORY} == {
        "data-disk-survives-replace",
        "checkpoint-bucket-survives-replace",
    }
    kept = {**overrides, "tpu-sft:keepDataDisk": "true"}  # keeps the disk and the bucket
    found = check_stack(_declared(mock_stack(kept)), stack_config={**dev_config, **kept})
    assert [v for v in found if v.level == MANDATORY] == []
