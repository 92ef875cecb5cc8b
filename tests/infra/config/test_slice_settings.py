"""tpu-sft:acceleratorType v6e-16 … v6e-256: which slices exist, what a slice cannot be given (one line naming
the key, before anything is declared), and `pulumi up` going ahead on one."""

import functools

import pytest
from pulumi import RunError

from infra.config import read_settings
from infra.plan.on_destroy import model_lost_on_destroy
from rehearsal.engine import Stack, run_program
from tests.fixtures.mock_engine import DISK_KEYS
from workload.core.accelerators import ACCELERATORS
from workload.core.config import ConfigError

SLICE = {"tpu-sft:acceleratorType": "v6e-32"}
FLEX = {"tpu-sft:provisioningModel": "FLEX_START", "tpu-sft:maxRunHours": "4", "tpu-sft:autostop": "off"}

# Google's v6e table (cloud.google.com/tpu/docs/v6e): topology, chips, VMs; multi-host VMs are ct6e-standard-4t.
SHAPES = [
    ("v6e-16", "4x4", 16, 4),
    ("v6e-32", "4x8", 32, 8),
    ("v6e-64", "8x8", 64, 16),
    ("v6e-128", "8x16", 128, 32),
    ("v6e-256", "16x16", 256, 64),
]


@pytest.mark.parametrize(("name", "topology", "chips", "hosts"), SHAPES, ids=[s[0] for s in SHAPES])
def test_each_slice_is_hosts_of_four_chips(name, topology, chips, hosts):
    accelerator = ACCELERATORS[name]
    assert (accelerator.machine_type, accelerator.topology, accelerator.chips) == ("ct6e-standard-4t", topology, chips)
    assert accelerator.hosts == hosts == chips // 4
    assert accelerator.chips_per_host_bounds == (2, 2, 1)
    assert accelerator.is_slice


@pytest.mark.parametrize("name", ["v6e-1", "v6e-4", "v6e-8"])
def test_single_host_types_stay_one_vm(name):
    accelerator = ACCELERATORS[name]
    assert (accelerator.hosts, accelerator.is_slice) == (1, False)
    assert ACCELERATORS["v6e-8"].machine_type == "ct6e-standard-8t"


def _config(dev_config, overrides=None, remove=DISK_KEYS):
    return {k: v for k, v in {**dev_config, **SLICE, **(overrides or {})}.items() if k not in remove}


def test_a_slice_parses(dev_config):
    parsed = read_settings.parse(_config(dev_config), stack="dev")
    assert parsed.is_slice and parsed.accelerator.hosts == 8
    assert parsed.max_run_hours is None  # reservation-bound, as the single VM: its hosts end with the reservation
    spot = read_settings.parse(
        _config(dev_config, {"tpu-sft:provisioningModel": "SPOT"}, remove=(*DISK_KEYS, "tpu-sft:reservation")),
        stack="dev",
    )
    assert spot.max_run_hours == 4  # the same derived cap as one VM's: it is each host's


# (overrides, keys removed, the key the message must name, words it must hold)
REFUSED = [
    (
        {**FLEX},
        DISK_KEYS,
        "tpu-sft:reservation",
        "FLEX_START",
    ),
    (
        {**FLEX, "tpu-sft:maxRunHours": "off"},
        (*DISK_KEYS, "tpu-sft:reservation"),
        "tpu-sft:maxRunHours",
        "required for FLEX_START",
    ),
    (
        {**FLEX, "tpu-sft:maxRunHours": "169"},
        (*DISK_KEYS, "tpu-sft:reservation"),
        "tpu-sft:maxRunHours",
        "seven days",
    ),
    ({**FLEX, "tpu-sft:autostop": "delete"}, (*DISK_KEYS, "tpu-sft:reservation"), "tpu-sft:autostop", "would not fill"),
    ({**FLEX, "tpu-sft:autostop": "delete"}, (*DISK_KEYS, "tpu-sft:reservation"), "tpu-sft:autostop", "autostop off"),
    (
        {"tpu-sft:instanceName": "a" * 53, "tpu-sft:checkpointBucket": "my-runs"},
        DISK_KEYS,
        "tpu-sft:instanceName",
        "at most 40 fit",
    ),
    ({"tpu-sft:access": "direct"}, DISK_KEYS, "tpu-sft:access", "access iap"),
    # the single-host rules still hold on a slice
    ({"tpu-sft:provisioningModel": "SPOT"}, DISK_KEYS, "tpu-sft:reservation", "SPOT"),
    ({}, (*DISK_KEYS, "tpu-sft:reservation"), "tpu-sft:reservation", "RESERVATION_BOUND"),
    ({"tpu-sft:autostop": "stop"}, DISK_KEYS, "tpu-sft:autostop", "cannot restart a stopped TPU VM"),
]


@pytest.mark.parametrize(
    ("overrides", "remove", "key", "words"), REFUSED, ids=[f"{i}-{r[2]}" for i, r in enumerate(REFUSED)]
)
def test_a_wrong_slice_setting_declares_nothing(dev_config, overrides, remove, key, words):
    declared = Stack()
    with pytest.raises(RunError) as raised:
        run_program(_config(dev_config, overrides, remove), into=declared)
    message = str(raised.value)
    assert message.startswith(f"{key}:"), message
    assert "\n" not in message and "Fix:" in message
    assert words in message
    assert declared.resources == []


def test_every_setting_a_slice_cannot_take_is_named_in_one_message(dev_config):
    """A flex-start stack switched to a slice, with autostop and direct access: one refusal names both keys."""
    config = {
        **{k: v for k, v in dev_config.items() if k != "tpu-sft:reservation"},
        **FLEX,
        "tpu-sft:autostop": "delete",
        "tpu-sft:acceleratorType": "v6e-16",
        "tpu-sft:access": "direct",
    }
    declared = Stack()
    with pytest.raises(RunError) as raised:
        run_program(config, into=declared)
    message = str(raised.value)
    assert message.startswith("tpu-sft:acceleratorType: v6e-16 is a slice, which 2 settings do not fit: "), message
    assert "\n" not in message and declared.resources == []
    fix = message.split(". Fix: ", 1)[1]
    assert fix == (
        "pulumi config set tpu-sft:autostop off; pulumi config set tpu-sft:access iap, "
        "or use tpu-sft:acceleratorType v6e-1, v6e-4 or v6e-8"
    )


def settings_warnings(caplog) -> list[str]:
    """The program's warnings but the Hub's: under the mock engine the Hub is unreachable, which says one line of its
    own wherever a token is set (tests/infra/config/test_google_checks.py)."""
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    return [w for w in warned if not w.startswith("tpu-sft:hfToken: not checked against ")]


def test_switching_the_example_stack_to_a_slice_is_one_key(dev_config, monkeypatch, caplog):
    """Pulumi.dev.yaml as shipped, with only tpu-sft:acceleratorType changed: it previews and runs, autostop (delete)
    and all; the data-disk keys are the one warning about settings (the other: the model that `pulumi destroy` would
    take with the bucket, tests/infra/plan/test_keep_on_destroy.py)."""
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 30)
    config = {**dev_config, "tpu-sft:acceleratorType": "v6e-32"}
    run_program(config)
    declared = run_program(config, preview=False)
    assert declared.one("gcp:compute/instanceGroupManager:InstanceGroupManager").inputs["targetSize"] == 8
    assert declared.of_type("gcp:projects/iAMMember:IAMMember")  # autostop's grant on the group
    assert (
        settings_warnings(caplog)
        == [
            "tpu-sft:dataDiskSizeGb, tpu-sft:dataDiskType ignored: a v6e-32 slice's hosts cannot share one read-write "
            "data disk, so a slice declares none and keeps its model in the checkpoint bucket",
            model_lost_on_destroy(read_settings.parse(config, stack="dev")),
        ]
        * 2
    )


def test_the_data_disk_keys_are_ignored_on_a_slice_with_one_warning(dev_config, monkeypatch, caplog):
    """The example stack sets them; a slice declares no data disk, so they are ignored, not refused: switching a
    stack to a slice does not mean removing them first."""
    parsed = read_settings.parse(_config(dev_config, remove=()), stack="dev")
    assert parsed.warnings == (
        "tpu-sft:dataDiskSizeGb, tpu-sft:dataDiskType ignored: a v6e-32 slice's hosts cannot share one read-write "
        "data disk, so a slice declares none and keeps its model in the checkpoint bucket",
    )
    assert read_settings.parse(_config(dev_config), stack="dev").warnings == ()
    assert read_settings.parse(dev_config, stack="dev").warnings == ()  # one VM uses them
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 30)
    declared = run_program(_config(dev_config, remove=()), preview=False)
    # The mock engine hands the program's warnings to Python's logging; the CLI prints them as `warning: …`
    assert settings_warnings(caplog) == [
        *parsed.warnings,
        model_lost_on_destroy(parsed),
    ]
    assert not declared.of_type("gcp:compute/disk:Disk")


def test_single_host_settings_are_still_accepted_on_v6e_8(dev_config):
    """dataDiskSizeGb, dataDiskType, autostop and the longest name (tests/infra/config/test_names.py) keep their meaning
    on one VM."""
    parsed = read_settings.parse(
        {
            **dev_config,
            "tpu-sft:autostop": "delete",
            "tpu-sft:instanceName": "a" * 40,
            "tpu-sft:checkpointBucket": "my-runs",
        },
        stack="dev",
    )
    assert (parsed.is_slice, parsed.data_disk_size_gb, parsed.autostop) == (False, 100, "delete")


def test_the_longest_slice_name_is_accepted(dev_config):
    long_name = {"tpu-sft:instanceName": "a" * 40, "tpu-sft:checkpointBucket": "my-runs"}
    parsed = read_settings.parse(_config(dev_config, long_name), stack="dev")
    assert parsed.instance_name == "a" * 40


@pytest.mark.parametrize("model", ["RESERVATION_BOUND", "STANDARD", "SPOT", "FLEX_START"])
def test_every_provisioning_model_is_accepted_on_a_slice(dev_config, model):
    remove = DISK_KEYS if model == "RESERVATION_BOUND" else (*DISK_KEYS, "tpu-sft:reservation")
    parse = functools.partial(read_settings.parse, stack="dev")
    overrides = FLEX if model == "FLEX_START" else {"tpu-sft:provisioningModel": model}
    assert parse(_config(dev_config, overrides, remove)).provisioning_model == model


def test_pulumi_up_on_a_slice_declares_the_slice_and_its_tasks(dev_config, monkeypatch):
    monkeypatch.setenv(
        "HF_TOKEN", "hf_" + "x" * 30
    )  # an update needs a token (tests/infra/config/test_settings_errors.py)
    declared = run_program(_config(dev_config), preview=False)
    types = {r.type for r in declared.resources}
    assert {"gcp:compute/instanceGroupManager:InstanceGroupManager", "command:local:Command"} <= types


# (overrides, keys removed, the whole line): what a FLEX_START slice cannot be given
FLEX_REFUSED = [
    (
        {"tpu-sft:maxRunHours": "4"},
        DISK_KEYS,
        "tpu-sft:reservation: cannot be consumed by a FLEX_START VM. Fix: pulumi config rm tpu-sft:reservation, or set "
        "tpu-sft:provisioningModel STANDARD (an ordinary reservation) or RESERVATION_BOUND (a calendar-mode one)",
    ),
    (
        {"tpu-sft:maxRunHours": "off"},
        (*DISK_KEYS, "tpu-sft:reservation"),
        "tpu-sft:maxRunHours: is required for FLEX_START VMs (Google caps their run time). Fix: pulumi config set "
        "tpu-sft:maxRunHours 4",
    ),
    (
        {"tpu-sft:maxRunHours": "169"},
        (*DISK_KEYS, "tpu-sft:reservation"),
        "tpu-sft:maxRunHours: is 169, but FLEX_START VMs run for at most 168 hours (seven days). "
        "Fix: pulumi config set tpu-sft:maxRunHours 168",
    ),
]


@pytest.mark.parametrize(("overrides", "remove", "line"), FLEX_REFUSED, ids=["reservation", "no-cap", "over-7-days"])
def test_what_a_flex_start_slice_cannot_take_is_one_whole_line(dev_config, overrides, remove, line):
    config = _config(dev_config, {**FLEX, **overrides}, remove)
    with pytest.raises(ConfigError) as raised:
        read_settings.parse(config, stack="dev")
    assert str(raised.value) == line


def test_a_flex_start_slice_takes_seven_days(dev_config):
    config = _config(
        dev_config,
        {**FLEX, "tpu-sft:maxRunHours": "168"},
        (*DISK_KEYS, "tpu-sft:reservation"),
    )
    assert read_settings.parse(config, stack="dev").max_run_hours == 168
