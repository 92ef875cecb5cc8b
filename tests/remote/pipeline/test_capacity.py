"""A flex-start slice's first task fills its empty group and waits until every host exists
(remote/pipeline/capacity.py), against a stand-in of the Compute Engine API's group (group_standin.py, beside this:
no Compute Engine exists here). The clock is the test's: an hour's wait takes no time.

The reasons a BULK group gives while it waits (`status.bulkInstanceOperation.lastProgressCheck.error`) are the codes
a field report shows, not Google's text: SkyPilot's tests of its TPU groups (skypilot-org/skypilot; fixtures dated
2026-07-22), ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS and QUOTA_EXCEEDED."""

import io
import json
import logging
from pathlib import Path

import pytest

from remote import cli
from remote.pipeline import capacity
from remote.pipeline.capacity import CapacityError, fill_group
from tests.remote.pipeline.group_standin import TOKEN, GroupStandin
from workload.core.contract import PIPELINE_ENV, TARGET_ENV

PATH = "projects/my-tpu-project/zones/us-east5-b/instanceGroupManagers/tpu-sft-dev"
EXHAUSTED = "ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS: Waiting for resources."


def gcloud(directory: Path, script: str) -> Path:
    """A `gcloud` on PATH that runs `script`."""
    directory.mkdir(exist_ok=True)
    (directory / "gcloud").write_text(f"#!/bin/sh\n{script}\n")
    (directory / "gcloud").chmod(0o755)
    return directory


class FakeClock:
    def __init__(self):
        self.now, self.sleeps = 0.0, []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def fill(standin, clock, size=4, **kwargs):
    return fill_group(PATH, size, token=lambda: TOKEN, api=standin.url, clock=clock, sleep=clock.sleep, **kwargs)


def test_resizes_the_empty_group_once_then_waits_with_a_line_every_poll_until_every_host_exists(caplog):
    caplog.set_level(logging.INFO, "remote")
    clock = FakeClock()
    waiting = ["", *[EXHAUSTED] * 239, "QUOTA_EXCEEDED: Quota is insufficient."]  # two hours, then all 4 at once
    with GroupStandin(PATH, waiting) as standin:
        done = fill(standin, clock)
    assert (done.target, done.hosts) == (4, 4)
    assert standin.resizes == [4]  # a plain resize, never a resize request
    assert clock.sleeps == [capacity.POLL_S] * 241 and capacity.POLL_S <= 60  # a line at least every minute
    lines = [r.getMessage() for r in caplog.records]
    assert lines[0] == "asking for the slice's 4 hosts: resizing group tpu-sft-dev from 0 to 4"
    assert lines[1] == "waiting for capacity: group tpu-sft-dev, 0 of 4 hosts, 0 min 0 s waited"
    assert lines[2] == (
        "waiting for capacity: group tpu-sft-dev, 0 of 4 hosts, 0 min 30 s waited; "
        "Compute Engine: ZONE_RESOURCE_POOL_EXHAUSTED_WITH_DETAILS: Waiting for resources."
    )
    assert lines[-2].endswith("2 h 0 min waited; Compute Engine: QUOTA_EXCEEDED: Quota is insufficient.")
    assert lines[-1] == "group tpu-sft-dev has its 4 hosts, after 2 h 0 min"
    assert {auth for _, _, auth in standin.requests} == {f"Bearer {TOKEN}"}
    assert [method for method, _, _ in standin.requests].count("POST") == 1


def test_a_group_already_asked_for_is_not_resized_again_and_the_wait_keeps_no_deadline_of_its_own():
    """The SSH wait's 10 minutes are not the group's: only Compute Engine ends a BULK group's wait."""
    clock = FakeClock()
    with GroupStandin(PATH, [EXHAUSTED] * 2000, target=4) as standin:
        assert fill(standin, clock).hosts == 4
        assert standin.resizes == []
        assert fill(standin, clock).hosts == 4  # the next phase's task: the hosts are there, nothing is asked
    assert clock.now > 16 * 3600


def test_a_target_lowered_under_the_wait_fails_in_one_line_with_what_to_do():
    clock = FakeClock()
    with GroupStandin(PATH, [EXHAUSTED] * 5) as standin:

        def lowered(seconds):
            clock.sleep(seconds)
            standin.target = 0  # resized to 0 by someone else while the hosts were awaited

        with pytest.raises(CapacityError) as failed:
            fill_group(PATH, 4, token=lambda: TOKEN, api=standin.url, clock=clock, sleep=lowered)
    message = str(failed.value)
    assert "target size is 0 of the slice's 4 after 0 min 30 s" in message and "\n" not in message
    assert "run `pulumi up` again" in message and TOKEN not in message


@pytest.mark.parametrize(
    ("token", "path", "hint"),
    [
        ("ya29.someone-else", PATH, "401 to GET"),
        (TOKEN, PATH.replace("tpu-sft-dev", "another"), "404 to GET"),
    ],
)
def test_a_refused_read_is_one_line_and_never_shows_the_token(token, path, hint):
    with GroupStandin(PATH, [EXHAUSTED]) as standin:
        with pytest.raises(CapacityError) as failed:
            fill_group(path, 4, token=lambda: token, api=standin.url, sleep=lambda _: None)
    assert hint in str(failed.value) and token not in str(failed.value)


def test_ctrl_c_leaves_the_group_as_it_is_and_says_the_next_up_waits_again(caplog):
    def interrupted(_):
        raise KeyboardInterrupt

    with GroupStandin(PATH, [EXHAUSTED] * 2, target=4) as standin:
        with pytest.raises(KeyboardInterrupt):
            fill_group(PATH, 4, token=lambda: TOKEN, api=standin.url, sleep=interrupted)
    assert [method for method, _, _ in standin.requests] == ["GET"]  # read once, never resized or deleted
    assert "stays as it is: the next `pulumi up` waits again" in caplog.text


def test_the_token_comes_from_gcloud_and_a_failing_gcloud_is_one_line(tmp_path, monkeypatch):
    bin_dir = gcloud(tmp_path / "bin", f'[ "$*" = "auth print-access-token" ] && echo {TOKEN}')
    monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
    assert capacity.access_token() == TOKEN
    gcloud(bin_dir, "echo 'ERROR: (gcloud.auth) You do not currently have an active account' >&2; exit 1")
    with pytest.raises(
        CapacityError, match=r"print-access-token failed: ERROR: \(gcloud.auth\) You do not .*auth login"
    ):
        capacity.access_token()


def test_the_first_task_of_a_flex_start_slice_fills_its_group_before_any_ssh_and_fails_in_one_line(
    tmp_path, monkeypatch, capsys
):
    """`python -m remote put-secret` and `phase`, as the program's tasks run them: the target names the group; its
    hosts do not resolve, so any SSH attempt would fail otherwise than the wait's own line."""
    bin_dir = gcloud(tmp_path / "bin", f"echo {TOKEN}")
    target = {
        "host": "tpu-sft-dev-01",
        "workers": ["tpu-sft-dev-02"],
        "user": "tpu-sft",
        "key_path": str(tmp_path / "key"),
        "known_hosts": str(tmp_path / "known_hosts"),
        "trust_on_first_use": True,
        "flex_start_group": PATH.replace("tpu-sft-dev", "deleted-by-hand"),
    }
    with GroupStandin(PATH, [EXHAUSTED]) as standin:
        monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
        monkeypatch.setenv("TPU_SFT_COMPUTE_API", standin.url)
        monkeypatch.setenv(TARGET_ENV, json.dumps(target))
        monkeypatch.setenv(PIPELINE_ENV, json.dumps({"profile": "tiny"}))
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"hf_" + b"x" * 30)))
        assert cli.main(["put-secret", "hf_token"]) == 1
        said = capsys.readouterr()
        assert cli.main(["phase", "bootstrap"]) == 1
        phase_said = capsys.readouterr()
    refused = "Compute Engine API answered 404 to GET"
    assert said.err.strip().splitlines()[-1].startswith(f"error: {refused}")
    summary = json.loads(phase_said.out.strip().splitlines()[-1])
    assert summary["ok"] is False and refused in summary["error"] and "run `pulumi up` again" in summary["error"]
    assert [method for method, _, _ in standin.requests] == ["GET", "GET"]
