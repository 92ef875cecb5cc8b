"""The `stack` label on every billable resource is one Google accepts, whatever the stack is called: Pulumi allows
capitals, '.' and any length in a stack's name, Google's label values only 63 of [a-z0-9_-]
(cloud.google.com/compute/docs/labeling-resources). The mock engine refuses labels as Google does
(rehearsal/name_rules.py), so a label Google would refuse fails the run here, not at the first `pulumi up`."""

import pytest

from infra.config import read_settings
from rehearsal.engine import run_program
from rehearsal.name_rules import NameRefused, refuse_invalid_labels

INSTANCE = "gcp:compute/instance:Instance"


@pytest.mark.parametrize(
    ("stack", "label"),
    [
        ("dev", "dev"),
        ("Prod.v2", "prod_v2"),
        ("Team_CI-42", "team_ci-42"),
        ("s" * 100, "s" * 63),
    ],
)
def test_the_stack_label_is_derived_as_google_accepts_it(dev_config, stack, label):
    assert dict(read_settings.parse(dev_config, stack=stack).labels)["stack"] == label
    declared = run_program(dev_config, stack=stack)
    labelled = [r for r in declared.resources if "labels" in r.inputs]
    assert labelled and all(r.inputs["labels"]["stack"] == label for r in labelled)


@pytest.mark.parametrize(
    "labels",
    [
        {"stack": "prod.v2"},
        {"stack": "s" * 64},
        {"Owner": "me"},
        {"1owner": "me"},
        {"": "me"},
        {"k" * 64: "me"},
        {f"k{i}": "v" for i in range(65)},
    ],
)
def test_the_mock_engine_refuses_labels_google_refuses(labels):
    with pytest.raises(NameRefused, match=r"^googleapi: Error 400: Invalid value for field 'resource.labels'"):
        refuse_invalid_labels(INSTANCE, {"name": "tpu-sft", "labels": labels})


def test_the_mock_engine_accepts_the_labels_google_accepts():
    refuse_invalid_labels(
        INSTANCE,
        {
            "labels": {
                "app": "tpu-sft",
                "stack": "s" * 63,
                "k" * 63: "",
                "owner": "é",
                **{f"k{i}": "v" for i in range(60)},
            }
        },
    )
