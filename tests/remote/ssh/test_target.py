"""A target is validated once; every error names the field and the fix, in one line."""

import json

import pytest

from remote.pipeline.target import PipelineTarget
from remote.ssh.errors import TargetError
from remote.ssh.target import Target

BASE = {"host": "10.0.0.2", "user": "ubuntu", "key_path": "/k", "known_hosts": "/kh"}


def test_json_round_trip_keeps_every_field():
    target = Target(
        **BASE,
        port=2222,
        gateway="gcloud compute start-iap-tunnel vm %p --listen-on-stdin",
        trust_on_first_use=True,
        workers=("10.0.0.3",),
        host_ids=(("10.0.0.2", "7"), ("10.0.0.3", "8")),
        connect_timeout=2.5,
        state_dir="/srv/x",
    )
    assert Target.from_json(target.to_json()) == target
    assert target.hosts == ("10.0.0.2", "10.0.0.3")
    assert json.loads(target.to_json())["host_ids"] == {"10.0.0.2": "7", "10.0.0.3": "8"}
    assert (target.host_id("10.0.0.3"), target.host_id("10.0.0.9")) == ("8", None)


@pytest.mark.parametrize(
    "change, field",
    [
        ({"port": 0}, "port"),
        ({"port": "22"}, "port"),
        ({"user": "root; rm"}, "user"),
        ({"host": "a b"}, "host"),
        ({"workers": ["10.0.0.2"]}, "workers"),
        ({"workers": ["$(x)"]}, "workers"),
        ({"connect_timeout": -1}, "connect_timeout"),
        ({"state_dir": "~/x"}, "state_dir"),
        ({"gateway": " "}, "gateway"),
        ({"colour": "red"}, "colour"),
        ({"known_hosts": None}, "known_hosts"),
        ({"host_ids": ["10.0.0.2", "7"]}, "host_ids"),
        ({"host_ids": {"10.0.0.9": "7"}, "trust_on_first_use": True}, "host_ids"),
        ({"host_ids": {"10.0.0.2": 7}, "trust_on_first_use": True}, "host_ids"),
        ({"host_ids": {"10.0.0.2": "7; rm"}, "trust_on_first_use": True}, "host_ids"),
        ({"host_ids": {"10.0.0.2": "7"}}, "host_ids"),  # a forgotten key could never be recorded again
    ],
)
def test_bad_field_is_named_with_a_fix(change, field):
    raw = {**BASE, **change}
    with pytest.raises(TargetError) as e:
        Target.from_json(json.dumps(raw))
    assert e.value.field == field
    message = str(e.value)
    assert message.startswith(f"target.{field}: ") and "Fix: " in message and "\n" not in message


def test_invalid_json_is_a_target_error():
    with pytest.raises(TargetError, match="not valid JSON"):
        Target.from_json("{host:")


GROUP = "projects/my-tpu-project/zones/us-east5-b/instanceGroupManagers/tpu-sft-dev"


@pytest.mark.parametrize(
    "value",
    [GROUP + "/../x", GROUP.replace("projects/", "projects/$(id)"), "tpu-sft-dev", 7, GROUP + "\n"],
)
def test_a_flex_start_group_that_is_not_a_path_is_refused_with_the_fix(value):
    with pytest.raises(TargetError) as e:
        PipelineTarget.from_json(json.dumps({**BASE, "flex_start_group": value}))
    assert e.value.field == "flex_start_group" and "Fix: " in str(e.value)


def test_a_flex_start_group_path_round_trips():
    target = PipelineTarget(**BASE, flex_start_group=GROUP)
    assert PipelineTarget.from_json(target.to_json()).flex_start_group == GROUP
