"""The metadata server stand-in (rehearsal/metadata_standin.py) enforces what the code here relies on: no
`Metadata-Flavor: Google` header, a 403; an attribute the host has, 200 with its text; one it lacks, 404."""

from __future__ import annotations

import urllib.error
import urllib.request

import pytest

from rehearsal.metadata_standin import ATTRIBUTES, MetadataStandin, tpu_env
from remote.pipeline.worker_order import tpu_env_value


@pytest.fixture
def standin():
    server = MetadataStandin("127.0.0.1", {"tpu-env": tpu_env(3, 4)})
    yield server
    server.stop()


def get(standin: MetadataStandin, name: str, headers: dict[str, str]) -> tuple[int, str, str | None]:
    request = urllib.request.Request(f"http://{standin.host}{ATTRIBUTES}{name}", headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode(), response.headers.get("Metadata-Flavor")
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), error.headers.get("Metadata-Flavor")


def test_without_the_metadata_flavor_header_the_answer_is_403(standin):
    assert get(standin, "tpu-env", {})[0] == 403
    assert (standin.refused, standin.requests) == (1, 0)


def test_an_attribute_is_served_as_set_and_a_missing_one_is_404(standin):
    status, text, flavor = get(standin, "tpu-env", {"Metadata-Flavor": "Google"})
    assert (status, flavor) == (200, "Google")
    assert tpu_env_value(text, "TPU_WORKER_ID") == "3" and tpu_env_value(text, "HOST_BOUNDS") == "1,4,1"
    assert get(standin, "worker-network-endpoints", {"Metadata-Flavor": "Google"})[0] == 404
    standin.set("tpu-env", None)
    assert get(standin, "tpu-env", {"Metadata-Flavor": "Google"})[0] == 404
    standin.set("tpu-env", "TPU_WORKER_ID: '0'\n")
    assert get(standin, "tpu-env", {"Metadata-Flavor": "Google"})[1] == "TPU_WORKER_ID: '0'\n"
