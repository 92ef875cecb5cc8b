"""The Hub stand-in and a write token's file, for the tests that publish to the Hub (test_publish.py,
test_publish_adapter.py)."""

from pathlib import Path

import pytest

from tests.hub_upload_standin import HubStandin
from tests.workload.publish.test_publish import WRITE_TOKEN


@pytest.fixture
def hub():
    with HubStandin(token=WRITE_TOKEN) as standin:
        yield standin


@pytest.fixture
def token_file(tmp_path) -> Path:
    path = tmp_path / "hf_write_token"
    path.write_text(WRITE_TOKEN + "\n")
    path.chmod(0o600)
    return path
