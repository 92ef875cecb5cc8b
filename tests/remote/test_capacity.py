"""A flex-start slice's first task waits on its resize request until the hosts exist (remote/pipeline/capacity.py),
against a stand-in of the Compute Engine API answering the documented states (tests/remote/resize_request_standin.py:
no Compute Engine exists here). The clock is the test's: an hour's wait takes no time."""

import io
import json
import logging
from pathlib import Path

import pytest

from remote import cli
from remote.pipeline import capacity
from remote.pipeline.capacity import CapacityError, wait_for_capacity
from tests.remote.resize_request_standin import TOKEN, ResizeRequestStandin
from workload.core.contract import PIPELINE_ENV, TARGET_ENV

PATH = (
    "projects/my-tpu-project/zones/us-east5-b/instanceGroupManagers/tpu-sft-dev"
    "/resizeRequests/tpu-sft-dev-hosts-1a2b3c4"
)


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


def wait(standin, clock, **kwargs):
    return wait_for_capacity(PATH, token=lambda: TOKEN, api=standin.url, clock=clock, sleep=clock.sleep, **kwargs)


def test_waits_through_the_documented_states_with_a_line_every_poll_until_the_hosts_exist(caplog):
    caplog.set_level(logging.INFO, "remote")
    clock = FakeClock()
    states = ["CREATING", *["ACCEPTED"] * 240, "SUCCEEDED"]  # two hours of no capacity, then all 4 at once
    with ResizeRequestStandin(PATH, states, hosts=4) as standin:
        done = wait(standin, clock)
    assert (done.state, done.hosts, done.target) == ("SUCCEEDED", 4, 4)
    assert clock.sleeps == [capacity.POLL_S] * 241 and capacity.POLL_S <= 60  # a line at least every minute
    lines = [r.getMessage() for r in caplog.records]
    assert (
        lines[0]
        == "waiting for capacity: resize request tpu-sft-dev-hosts-1a2b3c4 CREATING, 0 of 4 hosts, 0 min 0 s waited"
    )
    assert (
        lines[1]
        == "waiting for capacity: resize request tpu-sft-dev-hosts-1a2b3c4 ACCEPTED, 0 of 4 hosts, 0 min 30 s waited"
    )
    assert lines[-2].endswith("ACCEPTED, 0 of 4 hosts, 2 h 0 min waited")
    assert lines[-1] == "resize request tpu-sft-dev-hosts-1a2b3c4 SUCCEEDED: 4 of 4 hosts, after 2 h 0 min"
    assert {auth for _, _, auth in standin.requests} == {f"Bearer {TOKEN}"}
    assert all(method == "GET" for method, _, _ in standin.requests)


def test_the_wait_keeps_no_deadline_of_its_own():
    """The SSH wait's 10 minutes are not the request's: v1 gives a request no validity, so only it ends the wait."""
    clock = FakeClock()
    with ResizeRequestStandin(PATH, [*["ACCEPTED"] * 2000, "SUCCEEDED"], hosts=2) as standin:
        assert wait(standin, clock).state == "SUCCEEDED"
    assert clock.now > 16 * 3600


@pytest.mark.parametrize(
    ("ending", "error", "said"),
    [
        ("FAILED", "The zone does not have enough resources", "FAILED (The zone does not have enough resources)"),
        ("CANCELLED", "", "CANCELLED after 1 min 0 s:"),
    ],
)
def test_a_request_that_ends_without_hosts_fails_in_one_line_with_what_to_do(ending, error, said):
    clock = FakeClock()
    with ResizeRequestStandin(PATH, ["ACCEPTED", "ACCEPTED", ending], hosts=4, error=error) as standin:
        with pytest.raises(CapacityError) as failed:
            wait(standin, clock)
    message = str(failed.value)
    assert said in message and "\n" not in message and TOKEN not in message
    assert "no hosts will come from it" in message and "pulumi up --replace" in message


@pytest.mark.parametrize(
    ("token", "path", "hint"),
    [
        ("ya29.someone-else", PATH, "401 to GET"),
        (TOKEN, PATH.replace("tpu-sft-dev-hosts", "another"), "404 to GET"),
    ],
)
def test_a_refused_read_is_one_line_and_never_shows_the_token(token, path, hint):
    with ResizeRequestStandin(PATH, ["ACCEPTED"], hosts=4) as standin:
        with pytest.raises(CapacityError) as failed:
            wait_for_capacity(path, token=lambda: token, api=standin.url, sleep=lambda _: None)
    assert hint in str(failed.value) and token not in str(failed.value)


def test_ctrl_c_leaves_the_request_as_it_is_and_says_the_next_up_waits_again(caplog):
    def interrupted(_):
        raise KeyboardInterrupt

    with ResizeRequestStandin(PATH, ["ACCEPTED"], hosts=4) as standin:
        with pytest.raises(KeyboardInterrupt):
            wait_for_capacity(PATH, token=lambda: TOKEN, api=standin.url, sleep=interrupted)
    assert [method for method, _, _ in standin.requests] == ["GET", "GET"]  # read, never cancelled or deleted
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


def test_the_first_task_of_a_flex_start_slice_waits_before_any_ssh_and_fails_in_one_line(tmp_path, monkeypatch, capsys):
    """`python -m remote put-secret` and `phase`, as the program's tasks run them: the target names the request;
    its hosts do not resolve, so any SSH attempt would fail otherwise than the request's own line."""
    bin_dir = gcloud(tmp_path / "bin", f"echo {TOKEN}")
    target = {
        "host": "tpu-sft-dev-01",
        "workers": ["tpu-sft-dev-02"],
        "user": "tpu-sft",
        "key_path": str(tmp_path / "key"),
        "known_hosts": str(tmp_path / "known_hosts"),
        "trust_on_first_use": True,
        "resize_request": PATH,
    }
    with ResizeRequestStandin(PATH, ["FAILED"], hosts=2, error="out of v6e capacity") as standin:
        monkeypatch.setenv("PATH", f"{bin_dir}:/usr/bin:/bin")
        monkeypatch.setenv("TPU_SFT_COMPUTE_API", standin.url)
        monkeypatch.setenv(TARGET_ENV, json.dumps(target))
        monkeypatch.setenv(PIPELINE_ENV, json.dumps({"profile": "tiny"}))
        monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(b"hf_" + b"x" * 30)))
        assert cli.main(["put-secret", "hf_token"]) == 1
        said = capsys.readouterr()
        assert cli.main(["phase", "bootstrap"]) == 1
        phase_said = capsys.readouterr()
    assert (
        said.err.strip().splitlines()[-1].startswith("error: resize request tpu-sft-dev-hosts-1a2b3c4 is FAILED (out")
    )
    summary = json.loads(phase_said.out.strip().splitlines()[-1])
    assert summary["ok"] is False and "is FAILED (out of v6e capacity)" in summary["error"]
