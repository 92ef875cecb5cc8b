"""The `…-apis-ready` task (remote/pipeline/apis_ready.py) against the stand-in of a project whose APIs were just
enabled (rehearsal/google_apis.py: every call refused with Google's SERVICE_DISABLED for a while after the enable, and
`default` made by Compute Engine's first answered request): it waits until each API answers and the network exists,
and a propagation that never ends is one line after the bounded wait."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from rehearsal.google_apis import NEVER, GoogleApis
from remote.pipeline import apis_ready

PROJECT = "my-tpu-project"
APIS = [
    "compute.googleapis.com",
    "storage-api.googleapis.com",
    "storage.googleapis.com",
    "iam.googleapis.com",
    "oslogin.googleapis.com",
]


def request(**extra) -> dict:
    return {
        "project": PROJECT,
        "network": "default",
        "apis": APIS,
        "account": "me@example.com",
        "poll_s": 0.05,
        **extra,
    }


def test_it_waits_until_every_api_answers_and_the_default_network_exists():
    with GoogleApis(PROJECT, delay_s=0.5) as google:
        google.enable(*APIS)
        answered = apis_ready.wait(request(wait_s=30), {apis_ready.BASE_ENV: google.url})
    assert sorted(answered) == sorted(APIS)
    compute = [status for api, status in google.requests if api == "compute.googleapis.com"]
    assert compute[0] == 403 and 404 in compute and compute[-1] == 200  # off, then no network yet, then there


def test_a_propagation_that_never_ends_is_one_line_after_the_bounded_wait():
    with GoogleApis(PROJECT, delay_s=NEVER) as google:
        google.enable(*APIS)
        done = subprocess.run(
            [sys.executable, "-m", "remote.pipeline.apis_ready"],
            env={
                apis_ready.ENV: json.dumps(request(wait_s=0.3)),
                apis_ready.BASE_ENV: google.url,
                "PATH": "/usr/bin:/bin",
            },
            capture_output=True,
            text=True,
            timeout=120,
        )
    assert done.returncode == 1 and done.stdout == ""
    [line] = done.stderr.splitlines()
    assert line.startswith("apis-ready: after 0 min the APIs enabled for project my-tpu-project still do not answer")
    assert "compute.googleapis.com: the API is not on yet" in line and "run `pulumi up` again" in line


def test_another_refusal_ends_the_wait_at_once_with_googles_words():
    def refused(url, token):
        return 403, json.dumps({"error": {"code": 403, "message": "Required 'compute.networks.get' permission"}})

    with pytest.raises(apis_ready.NotReady, match="compute.googleapis.com refused a read of project my-tpu-project: "):
        apis_ready.wait(request(wait_s=30), {apis_ready.BASE_ENV: "http://x"}, answer=refused)


def test_another_network_is_never_made_for_the_stack():
    """Only `default` appears by itself: a network the stack names that does not exist stays missing."""
    with GoogleApis(PROJECT, delay_s=0) as google:
        google.enable(*APIS)
        with pytest.raises(apis_ready.NotReady, match="compute.googleapis.com: network mine not found"):
            apis_ready.wait(request(network="mine", wait_s=0.3), {apis_ready.BASE_ENV: google.url})
