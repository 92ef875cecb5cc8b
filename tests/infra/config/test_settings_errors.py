"""Every malformed setting stops the program before anything is declared, with one line naming the key."""

import dataclasses
import functools

import pytest
from pulumi import RunError

from infra.config import read_settings
from rehearsal.engine import Stack, is_secret, plain, run_program
from workload.core.config import ConfigError

SECRET = "tpu-sft:hfToken"
TOKEN = "hf_" + "Abc123" * 6

# (overrides, keys to remove, secret keys, the key the message must name)
MALFORMED = [
    ({"tpu-sft:steps": "0"}, (), (), "tpu-sft:steps"),
    ({"tpu-sft:steps": "-5"}, (), (), "tpu-sft:steps"),
    ({"tpu-sft:steps": "ten"}, (), (), "tpu-sft:steps"),
    ({"tpu-sft:steps": "1.5"}, (), (), "tpu-sft:steps"),
    ({"tpu-sft:perDeviceBatchSize": "0"}, (), (), "tpu-sft:perDeviceBatchSize"),
    ({"tpu-sft:perDeviceBatchSize": "x"}, (), (), "tpu-sft:perDeviceBatchSize"),
    ({"tpu-sft:model": "llama3-8b"}, (), (), "tpu-sft:model"),
    ({"tpu-sft:model": "gemma2-2b"}, (), (), "tpu-sft:model"),
    ({"tpu-sft:dataset": "not a dataset"}, (), (), "tpu-sft:dataset"),
    ({"tpu-sft:trainDataColumns": "messages"}, (), (), "tpu-sft:trainDataColumns"),
    ({"tpu-sft:trainDataColumns": "[]"}, (), (), "tpu-sft:trainDataColumns"),
    ({"tpu-sft:trainSplit": "train sft"}, (), (), "tpu-sft:trainSplit"),
    ({"tpu-sft:maxtextVersion": "latest"}, (), (), "tpu-sft:maxtextVersion"),
    ({"tpu-sft:acceleratorType": "v5p-8"}, (), (), "tpu-sft:acceleratorType"),
    ({"tpu-sft:learningRate": "-1e-3"}, (), (), "tpu-sft:learningRate"),
    ({"tpu-sft:evalTasks": '["mmlu"]'}, (), (), "tpu-sft:evalTasks"),  # the eval's (docs/eval.md)
    ({"tpu-sft:evalTasks": "ifeval"}, (), (), "tpu-sft:evalTasks"),
    ({"tpu-sft:evalLimit": "0"}, (), (), "tpu-sft:evalLimit"),
    ({"tpu-sft:evalLimit": "-10"}, (), (), "tpu-sft:evalLimit"),
    ({"tpu-sft:provisioningModel": "PREEMPTIBLE"}, (), (), "tpu-sft:provisioningModel"),
    ({}, ("tpu-sft:reservation",), (), "tpu-sft:reservation"),
    ({"tpu-sft:reservation": "Bad_Name!"}, (), (), "tpu-sft:reservation"),
    ({"tpu-sft:provisioningModel": "SPOT"}, (), (), "tpu-sft:reservation"),
    ({"tpu-sft:provisioningModel": "FLEX_START", "tpu-sft:maxRunHours": "4"}, (), (), "tpu-sft:reservation"),
    ({"tpu-sft:serviceAccount": "default"}, (), (), "tpu-sft:serviceAccount"),
    (
        {"tpu-sft:provisioningModel": "FLEX_START", "tpu-sft:maxRunHours": "off"},
        ("tpu-sft:reservation",),
        (),
        "tpu-sft:maxRunHours",
    ),
    (
        {"tpu-sft:provisioningModel": "FLEX_START", "tpu-sft:maxRunHours": "169"},
        ("tpu-sft:reservation",),
        (),
        "tpu-sft:maxRunHours",
    ),  # flex-start VMs run at most seven days
    ({"tpu-sft:autostop": "hibernate"}, (), (), "tpu-sft:autostop"),
    ({"tpu-sft:autostop": "stop"}, (), (), "tpu-sft:autostop"),  # once offered: Google cannot restart a TPU VM
    ({"tpu-sft:idleMinutes": "0"}, (), (), "tpu-sft:idleMinutes"),
    ({"tpu-sft:maxRunHours": "0"}, (), (), "tpu-sft:maxRunHours"),
    ({"tpu-sft:sshSourceRanges": '["0.0.0.0/0"]'}, (), (), "tpu-sft:sshSourceRanges"),
    ({"tpu-sft:sshSourceRanges": '["10.0.0.1/8"]'}, (), (), "tpu-sft:sshSourceRanges"),
    ({"tpu-sft:sshSourceRanges": '["300.1.2.3/32"]'}, (), (), "tpu-sft:sshSourceRanges"),
    ({"tpu-sft:sshSourceRanges": "35.235.240.0/20"}, (), (), "tpu-sft:sshSourceRanges"),
    ({"tpu-sft:sshSourceRanges": "[]"}, (), (), "tpu-sft:sshSourceRanges"),
    ({"tpu-sft:dangerouslyAllowSshFromAnywhere": "yes"}, (), (), "tpu-sft:dangerouslyAllowSshFromAnywhere"),
    ({"gcp:zone": "us-east5"}, (), (), "gcp:zone"),
    ({}, ("gcp:zone",), (), "gcp:zone"),
    ({"gcp:project": "My Project"}, (), (), "gcp:project"),
    ({}, ("gcp:project",), (), "gcp:project"),
    ({"tpu-sft:instanceName": "TPU_VM"}, (), (), "tpu-sft:instanceName"),
    ({"tpu-sft:bootDiskSizeGb": "20"}, (), (), "tpu-sft:bootDiskSizeGb"),
    ({"tpu-sft:dataDiskSizeGb": "big"}, (), (), "tpu-sft:dataDiskSizeGb"),
    ({"tpu-sft:dataDiskType": "pd-standard"}, (), (), "tpu-sft:dataDiskType"),
    ({"tpu-sft:keepDataDisk": "maybe"}, (), (), "tpu-sft:keepDataDisk"),
    ({"tpu-sft:allowDataDiskReplace": "maybe"}, (), (), "tpu-sft:allowDataDiskReplace"),
    ({"tpu-sft:access": "vpn"}, (), (), "tpu-sft:access"),
    ({"tpu-sft:access": "direct", "tpu-sft:externalIp": "false"}, (), (), "tpu-sft:externalIp"),
    ({"tpu-sft:sshUser": "Root User"}, (), (), "tpu-sft:sshUser"),
    ({"tpu-sft:sshPublicKeyPath": "~/.ssh/google_compute_engine"}, (), (), "tpu-sft:sshPublicKeyPath"),
    ({}, ("tpu-sft:sshPublicKey",), (), "tpu-sft:sshPublicKey"),
    ({"tpu-sft:sshPublicKey": "-----BEGIN OPENSSH PRIVATE KEY-----"}, (), (), "tpu-sft:sshPublicKey"),
    ({"tpu-sft:labels": '{"Owner": "me"}'}, (), (), "tpu-sft:labels"),
    ({"tpu-sft:labels": '["owner"]'}, (), (), "tpu-sft:labels"),
    ({"tpu-sft:pricePerChipHour": "free"}, (), (), "tpu-sft:pricePerChipHour"),
    ({SECRET: TOKEN}, (), (), SECRET),
    ({"tpu-sft:runName": TOKEN}, (), (), "tpu-sft:runName"),
    ({"tpu-sft:stepz": "10"}, (), (), "tpu-sft:stepz"),
    ({"tpu-sft:torchBackend": "cuda"}, (), (), "tpu-sft:torchBackend"),
    # exact matches: a trailing newline, other scripts' digits and letters, a second line
    ({"tpu-sft:steps": "10\n"}, (), (), "tpu-sft:steps"),
    ({"tpu-sft:steps": "١٠"}, (), (), "tpu-sft:steps"),
    ({"tpu-sft:learningRate": "nan"}, (), (), "tpu-sft:learningRate"),
    ({"tpu-sft:maxtextVersion": "0.2.2\n"}, (), (), "tpu-sft:maxtextVersion"),
    ({"tpu-sft:maxtextVersion": "0.2.٢"}, (), (), "tpu-sft:maxtextVersion"),
    ({"tpu-sft:dataset": "owner/ｎame"}, (), (), "tpu-sft:dataset"),
    ({"gcp:zone": "us-east5-b\n"}, (), (), "gcp:zone"),
    ({"gcp:zone": "us-east٥-b"}, (), (), "gcp:zone"),
    ({"gcp:project": "my-project\n"}, (), (), "gcp:project"),
    ({"tpu-sft:instanceName": "tpu-sft\n"}, (), (), "tpu-sft:instanceName"),
    ({"tpu-sft:sshUser": "tpu-sft\n"}, (), (), "tpu-sft:sshUser"),
    ({"tpu-sft:labels": '{"owner": "me\\n"}'}, (), (), "tpu-sft:labels"),
    ({"tpu-sft:sshSourceRanges": "[5]"}, (), (), "tpu-sft:sshSourceRanges"),
    ({"tpu-sft:sshPublicKey": "ssh-ed25519 AAAA me\nssh-ed25519 BBBB intruder"}, (), (), "tpu-sft:sshPublicKey"),
    ({"tpu-sft:installPostTrainExtras": "1"}, (), (), "tpu-sft:installPostTrainExtras"),
]


@pytest.mark.parametrize(
    ("overrides", "remove", "secret_keys", "key"), MALFORMED, ids=[f"{i}-{m[3]}" for i, m in enumerate(MALFORMED)]
)
def test_malformed_setting_declares_nothing(dev_config, overrides, remove, secret_keys, key):
    config = {k: v for k, v in {**dev_config, **overrides}.items() if k not in remove}
    declared = Stack()
    with pytest.raises(RunError) as raised:
        run_program(config, secret_keys=secret_keys, into=declared)
    message = str(raised.value)
    assert message.startswith(f"{key}:"), message
    assert "\n" not in message
    assert "Fix:" in message
    assert TOKEN not in message  # a misplaced secret is named, never echoed
    assert declared.resources == []


def test_there_are_at_least_thirty_cases():
    assert len(MALFORMED) >= 30


def test_secret_token_is_accepted_and_only_travels_as_a_secret(mock_stack):
    stack = mock_stack({SECRET: TOKEN}, secret_keys=(SECRET,))
    assert stack.of_type("gcp:compute/instance:Instance")
    assert TOKEN not in repr([plain(r.inputs) for r in stack.resources]) + repr(stack.outputs)
    (uploader,) = [r for r in stack.of_type("command:local:Command") if r.name.endswith("-hf-token")]
    assert is_secret(uploader.inputs["stdin"]) and uploader.inputs["stdin"]["value"] == TOKEN


def test_an_update_without_any_token_stops_before_anything_is_created(dev_config, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    declared = Stack()
    with pytest.raises(RunError, match=r"^tpu-sft:hfToken: is not set and \$HF_TOKEN is empty"):
        run_program(dev_config, preview=False, into=declared)
    assert declared.resources == []
    assert run_program(dev_config, preview=True).resources  # a preview (CI) needs no token


@pytest.mark.parametrize("source", ["config", "environment"])
def test_an_update_with_a_token_goes_ahead(dev_config, monkeypatch, source):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    if source == "environment":
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        stack = run_program(dev_config, preview=False)
    else:
        stack = run_program({**dev_config, SECRET: TOKEN}, secret_keys=(SECRET,), preview=False)
    assert stack.of_type("gcp:compute/instance:Instance")


# Each lower bound: the bound itself is a valid setting, one below it is not.
BOUNDS = [
    ("tpu-sft:steps", "1", "0"),
    ("tpu-sft:perDeviceBatchSize", "1", "0"),
    ("tpu-sft:maxTargetLength", "8", "7"),
    ("tpu-sft:checkpointPeriod", "1", "0"),
    ("tpu-sft:bootDiskSizeGb", "100", "99"),
    ("tpu-sft:dataDiskSizeGb", "10", "9"),
    ("tpu-sft:maxRunHours", "1", "0"),
    ("tpu-sft:idleMinutes", "1", "0"),
    ("tpu-sft:checkpointRetentionDays", "1", "0"),
    ("tpu-sft:pricePerChipHour", "0.01", "0"),
    ("tpu-sft:learningRate", "1e-9", "-1e-9"),
]


@pytest.mark.parametrize(("key", "lowest", "below"), BOUNDS, ids=[b[0] for b in BOUNDS])
def test_the_lowest_valid_value_is_accepted_and_one_below_refused(dev_config, key, lowest, below):
    parse = functools.partial(read_settings.parse, stack="dev")
    parse({**dev_config, key: lowest})
    with pytest.raises(ConfigError, match=f"^{key}:"):
        parse({**dev_config, key: below})


def test_settings_never_show_the_token(dev_config):
    """Settings end up in logs and tracebacks: their repr leaves the tokens (and the long public key) out."""
    public_key = "ssh-ed25519 AAAAC3NzaPublicKeyBody"
    write_token = "hf_" + "Wrt456" * 6
    parsed = read_settings.parse(
        {**dev_config, "tpu-sft:sshPublicKey": public_key, SECRET: TOKEN, "tpu-sft:hfWriteToken": write_token},
        stack="dev",
        secret_keys=frozenset({SECRET, "tpu-sft:hfWriteToken"}),
    )
    assert (parsed.hf_token, parsed.hf_write_token) == (TOKEN, write_token)
    assert TOKEN not in repr(parsed) and write_token not in repr(parsed) and "PublicKeyBody" not in repr(parsed)


def test_of_several_unknown_keys_the_first_in_order_is_named_with_its_own_fix(dev_config):
    with pytest.raises(ConfigError) as raised:
        read_settings.parse({**dev_config, "tpu-sft:zzz": "1", "tpu-sft:stepz": "10"}, stack="dev")
    assert str(raised.value) == (
        "tpu-sft:stepz: is not a tpu-sft setting (a typo?). Fix: `pulumi config rm "
        "tpu-sft:stepz`; the settings are listed in Pulumi.dev.yaml"
    )


def test_a_key_with_a_second_colon_is_not_taken_for_the_setting_before_it(dev_config):
    """A hand-edited stack file (read as it is by `python -m infra.plan`) can hold one; it is a typo, not steps."""
    with pytest.raises(ConfigError, match=r"steps:10: is not a tpu-sft setting"):
        read_settings.parse({**dev_config, "tpu-sft:steps:10": "10"}, stack="dev")


@pytest.mark.parametrize(
    ("key", "secret_key"),
    [
        ("tpu-sft:runName", "tpu-sft:hfToken"),  # a token in an ordinary setting belongs in the read token's key
        ("tpu-sft:hfToken", "tpu-sft:hfToken"),
        ("tpu-sft:hfWriteToken", "tpu-sft:hfWriteToken"),  # a token setting stored in plain text: its own key
    ],
)
def test_a_token_in_plain_text_points_at_the_secret_key_it_belongs_in(dev_config, key, secret_key):
    with pytest.raises(ConfigError) as raised:
        read_settings.parse({**dev_config, key: TOKEN}, stack="dev")
    assert str(raised.value).endswith(f"Fix: remove it and run `pulumi config set --secret {secret_key}` instead")
    assert TOKEN not in str(raised.value)


def test_iap_access_needs_no_external_ip(dev_config):
    """Without an external IP the VM's egress is Cloud NAT's business; IAP reaches it all the same."""
    parsed = read_settings.parse({**dev_config, "tpu-sft:access": "iap", "tpu-sft:externalIp": "false"}, stack="dev")
    assert (parsed.access, parsed.external_ip) == ("iap", False)


def test_a_stack_with_only_the_required_keys_gets_the_documented_defaults():
    parsed = read_settings.parse(
        {
            "gcp:project": "my-project-123",
            "gcp:zone": "us-east5-b",
            "tpu-sft:reservation": "my-v6e-reservation",
            "tpu-sft:sshPublicKey": "ssh-ed25519 AAAA me@laptop",
        },
        stack="dev",
    )
    assert {
        name: getattr(parsed, name)
        for name in (
            "provisioning_model",
            "instance_name",
            "network",
            "subnetwork",
            "boot_disk_size_gb",
            "data_disk_size_gb",
            "data_disk_type",
            "keep_data_disk",
            "access",
            "external_ip",
            "ssh_source_ranges",
            "ssh_user",
            "ssh_public_key_path",
            "ssh_public_key",
            "labels",
            "price_per_chip_hour",
            "max_run_hours",
            "hf_token",
            "service_account",
            "ssh_access",
            "os_login_account",
            "autostop",
            "idle_minutes",
            "publish_gcs_uri",
            "publish_hub_repo",
            "publish_hub_public",
            "hf_write_token",
            "checkpoint_bucket",
            "checkpoint_retention_days",
            "keep_checkpoint_bucket",
        )
    } == {
        "provisioning_model": "RESERVATION_BOUND",
        "instance_name": "tpu-sft",
        "network": "default",
        "subnetwork": None,
        "boot_disk_size_gb": 200,
        "data_disk_size_gb": 100,
        "data_disk_type": "hyperdisk-balanced",
        "keep_data_disk": False,
        "access": "iap",
        "external_ip": True,
        "ssh_source_ranges": ("35.235.240.0/20",),
        "ssh_user": "tpu-sft",
        "ssh_public_key_path": "~/.ssh/google_compute_engine.pub",
        "ssh_public_key": "ssh-ed25519 AAAA me@laptop",
        "labels": (("app", "tpu-sft"), ("stack", "dev")),
        "price_per_chip_hour": None,
        "max_run_hours": None,  # RESERVATION_BOUND: the VM ends with its reservation (infra/pricing/run_cap.py)
        "hf_token": None,
        "service_account": None,
        "ssh_access": "metadata",
        "os_login_account": None,
        "autostop": "delete",
        "idle_minutes": 30,
        "publish_gcs_uri": None,
        "publish_hub_repo": None,
        "publish_hub_public": False,
        "hf_write_token": None,
        "checkpoint_bucket": "my-project-123-tpu-sft-runs",
        "checkpoint_retention_days": 30,
        "keep_checkpoint_bucket": False,
    }


def test_validated_settings_cannot_be_changed_afterwards(dev_config):
    parsed = read_settings.parse(dev_config, stack="dev")
    with pytest.raises(dataclasses.FrozenInstanceError):
        parsed.ssh_source_ranges = ("0.0.0.0/0",)  # type: ignore[misc]
