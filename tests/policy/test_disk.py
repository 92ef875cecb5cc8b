"""The data disk is not deleted by a replace unless the user allowed it (mandatory)."""

import pytest

from policy import disk

DATA = {"labels": {"app": "tpu-sft", "tpu-sft-role": "data"}, "size": 100}


@pytest.mark.parametrize(
    ("props", "options"),
    [
        pytest.param(DATA, {"retain_on_delete": True}, id="kept"),
        pytest.param(DATA, {"protect": True}, id="protected"),
        pytest.param(DATA, {"replace_allowed": True}, id="user-accepts-the-loss"),
        pytest.param({"labels": {"app": "tpu-sft"}}, {}, id="not-the-data-disk"),
        pytest.param({}, {}, id="unlabelled-disk"),
    ],
)
def test_passes(props, options):
    flags = {"protect": False, "retain_on_delete": False, "replace_allowed": False, **options}
    assert disk.DATA_DISK.lost_to_a_replace("data", props, **flags) == []


def test_fails_when_nothing_guards_it():
    [message] = disk.DATA_DISK.lost_to_a_replace(
        "data", DATA, protect=False, retain_on_delete=False, replace_allowed=False
    )
    assert message.startswith("data disk data (where the fine-tuned model lives) would be deleted")
    assert "tpu-sft:keepDataDisk true" in message and "tpu-sft:allowDataDiskReplace true" in message
