"""Every name the program declares is one Google accepts: the mock engine names resources as pulumi-gcp would and
refuses what Compute Engine, Cloud Storage and IAM refuse (rehearsal/autonaming.py, rehearsal/name_rules.py), and
the longest names the settings accept pass it, on one VM and on slices."""

import pytest
from pulumi import RunError

from infra.config import cross_key_rules, read_settings
from rehearsal.autonaming import AutoNameTooLong, auto_named
from rehearsal.engine import Stack, run_program
from rehearsal.name_rules import NameRefused, refuse_invalid_names
from tests.fixtures.mock_engine import DISK_KEYS
from workload.core.config import ConfigError

FIREWALL = "gcp:compute/firewall:Firewall"
MIG = "gcp:compute/instanceGroupManager:InstanceGroupManager"
BUCKET = "gcp:storage/bucket:Bucket"
ROLE = "gcp:projects/iAMCustomRole:IAMCustomRole"
ACCOUNT = "gcp:serviceaccount/account:Account"

# (accelerator type and provisioning, overrides, keys removed)
SHAPES = {
    "v6e-8": ({}, ()),
    "v6e-16": ({"tpu-sft:acceleratorType": "v6e-16", "tpu-sft:autostop": "off"}, DISK_KEYS),
    "v6e-16-flex-start": (
        {
            "tpu-sft:acceleratorType": "v6e-16",
            "tpu-sft:autostop": "off",
            "tpu-sft:provisioningModel": "FLEX_START",
            "tpu-sft:maxRunHours": "4",
        },
        (*DISK_KEYS, "tpu-sft:reservation"),
    ),
}
LONGEST_PROJECT = "p" * 29 + "1"  # project ids: 6-30 characters
LONGEST_BUCKET = "b" * 63


def _config(dev_config, shape, overrides=None):
    changes, removed = SHAPES[shape]
    merged = {**dev_config, **changes, **(overrides or {})}
    return {k: v for k, v in merged.items() if k not in removed}


def _longest_accepted(config: dict[str, str], key: str) -> int:
    """The longest value of `key` (a run of 'a') that the settings accept, found by asking them."""
    for length in range(63, 0, -1):
        try:
            read_settings.parse({**config, key: "a" * length}, stack="dev")
        except ConfigError:
            continue
        return length
    raise AssertionError(f"no value of {key} is accepted")


# -- Pulumi's auto-names, as pulumi-gcp makes them


def test_a_resource_without_a_name_gets_the_logical_name_a_dash_and_seven_hex_digits():
    named = auto_named(FIREWALL, "tpu-sft-dev-ssh", {"network": "default"})
    assert named["name"].startswith("tpu-sft-dev-ssh-") and len(named["name"]) == len("tpu-sft-dev-ssh-") + 7
    assert int(named["name"][-7:], 16) >= 0
    assert auto_named(FIREWALL, "tpu-sft-dev-ssh", {"network": "default"}) == named  # the same from run to run
    assert auto_named(FIREWALL, "x", {"name": "given"})["name"] == "given"


def test_only_resources_with_a_name_input_are_auto_named():
    member = "gcp:compute/instanceIAMMember:InstanceIAMMember"
    assert "name" not in auto_named(member, "tpu-sft-dev-autostop-binding", {"role": "r"})
    assert "name" not in auto_named("command:local:Command", "tpu-sft-dev-pipeline-train", {})


def test_a_custom_role_without_an_id_gets_a_dashed_id_that_iam_refuses():
    """pulumi-gcp auto-names a project custom role's roleId with '-', which role IDs cannot hold."""
    named = auto_named(ROLE, "autostop-role", {"project": "p"})
    assert named["roleId"].startswith("autostop-role-")
    with pytest.raises(NameRefused, match="Invalid role_id"):
        refuse_invalid_names(ROLE, named)


def test_an_auto_named_service_account_id_over_thirty_characters_is_refused_by_the_provider():
    with pytest.raises(AutoNameTooLong, match="longer than maximum length 30"):
        auto_named(ACCOUNT, "a" * 23, {})
    assert len(auto_named(ACCOUNT, "a" * 22, {})["accountId"]) == 30


# -- what Google refuses


@pytest.mark.parametrize("name", ["a" * 64, "Tpu-sft", "tpu_sft", "1tpu", "tpu-", ""])
def test_compute_engine_refuses_a_name_that_is_not_rfc_1035_within_63(name):
    with pytest.raises(NameRefused, match=r"^googleapi: Error 400: Invalid value for field 'resource.name'"):
        refuse_invalid_names(FIREWALL, {"name": name})


def test_compute_engine_accepts_63_characters():
    refuse_invalid_names(FIREWALL, {"name": "a" * 63})
    refuse_invalid_names("gcp:compute/instanceIAMMember:InstanceIAMMember", {})  # no name: nothing to check


def test_a_numbered_base_instance_name_holds_at_most_52_characters_before_the_hyphen():
    refuse_invalid_names(MIG, {"name": "a", "baseInstanceName": "a" * 52 + "-##"})
    with pytest.raises(NameRefused, match="baseInstanceName"):
        refuse_invalid_names(MIG, {"name": "a", "baseInstanceName": "a" * 53 + "-##"})


@pytest.mark.parametrize(
    ("name", "why"),
    [
        ("ab", "3-63"),
        ("b" * 64, "3-63"),
        ("-runs", "3-63"),
        ("Runs", "3-63"),
        ("runs.example.com", "dots"),
        ("goog-runs", '"goog"'),
        ("my-google-runs", '"google"'),
        ("my-g00gle-runs", '"google"'),
    ],
)
def test_cloud_storage_refuses_a_bucket_name_it_does_not_allow(name, why):
    with pytest.raises(NameRefused, match=r"^googleapi: Error 400: Invalid bucket name") as refused:
        refuse_invalid_names(BUCKET, {"name": name})
    assert why in str(refused.value)


@pytest.mark.parametrize("name", ["abc", "b" * 63, "my_runs-2"])
def test_cloud_storage_accepts_a_plain_bucket_name(name):
    refuse_invalid_names(BUCKET, {"name": name})


@pytest.mark.parametrize(
    ("type_", "field", "good", "bad"),
    [
        (ROLE, "roleId", "tpuSftAutostop.dev.a_b", "tpu-sft"),
        (ROLE, "roleId", "a" * 64, "a" * 65),
        (ACCOUNT, "accountId", "tpu-sft-vm", "tpu"),
        (ACCOUNT, "accountId", "a" * 30, "a" * 31),
    ],
)
def test_iam_refuses_role_and_account_ids_off_their_pattern(type_, field, good, bad):
    refuse_invalid_names(type_, {field: good})
    with pytest.raises(NameRefused):
        refuse_invalid_names(type_, {field: bad})


def test_a_name_still_unknown_at_preview_is_checked_when_known():
    refuse_invalid_names(ROLE, {"roleId": object()})  # a preview's unknown output: Google sees it only at `up`


# -- the program, with the longest names the settings accept


def _declared_compute_names(stack: Stack) -> set[str]:
    """What each Compute Engine resource is named by, as cross_key_rules.derived_names writes it: a given name as is, an
    auto-name as the logical name plus cross_key_rules.AUTO_NAME_SUFFIX."""
    names = set()
    for resource in stack.resources:
        named = "name" in auto_named(resource.type, resource.name, resource.inputs)
        if resource.type.startswith("gcp:compute/") and named:
            names.add(resource.inputs.get("name") or resource.name + cross_key_rules.AUTO_NAME_SUFFIX)
        if resource.type == MIG:
            names.add(resource.inputs["baseInstanceName"])
    return names


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_longest_instance_name_the_settings_accept_passes_google(dev_config, shape):
    config = _config(dev_config, shape)
    longest = _longest_accepted(config, "tpu-sft:instanceName")
    stack = run_program({**config, "tpu-sft:instanceName": "a" * longest})
    parsed = read_settings.parse({**config, "tpu-sft:instanceName": "a" * longest}, stack="dev")
    # settings and program cannot drift: the names settings check are exactly the names the program declares
    assert {d.name for d in cross_key_rules.derived_names(parsed)} == _declared_compute_names(stack)


@pytest.mark.parametrize("shape", list(SHAPES))
def test_one_character_more_is_refused_by_the_settings_in_one_line(dev_config, shape):
    config = _config(dev_config, shape)
    too_long = "a" * (_longest_accepted(config, "tpu-sft:instanceName") + 1)
    declared = Stack()
    with pytest.raises(RunError) as refused:
        run_program({**config, "tpu-sft:instanceName": too_long}, into=declared)
    message = str(refused.value)
    assert message.startswith("tpu-sft:instanceName: ") and "\n" not in message
    assert "63" in message and "Fix: pulumi config set tpu-sft:instanceName a" in message
    assert declared.resources == []


@pytest.mark.parametrize("shape", list(SHAPES))
def test_the_longest_project_and_bucket_pass_google(dev_config, shape):
    config = _config(dev_config, shape, {"gcp:project": LONGEST_PROJECT, "tpu-sft:checkpointBucket": LONGEST_BUCKET})
    longest = _longest_accepted(config, "tpu-sft:instanceName")
    # The stack's name feeds no Compute Engine name; it becomes the `stack` label, which Google caps at 63.
    run_program({**config, "tpu-sft:instanceName": "a" * longest}, stack="s" * 63)


@pytest.mark.parametrize(
    ("overrides", "words"),
    [
        ({"tpu-sft:checkpointBucket": "goog-runs"}, '"goog"'),
        ({"tpu-sft:checkpointBucket": "team-google-runs"}, '"google"'),
        ({"tpu-sft:instanceName": "google-tpu"}, '"google"'),  # the derived bucket name holds it
    ],
)
def test_a_bucket_name_cloud_storage_refuses_is_refused_by_the_settings(dev_config, overrides, words):
    with pytest.raises(ConfigError) as refused:
        read_settings.parse({**dev_config, **overrides}, stack="dev")
    assert str(refused.value).startswith("tpu-sft:checkpointBucket: ") and words in str(refused.value)
