import json

import pytest


@pytest.fixture
def unreachable_target(tmp_path, monkeypatch) -> dict:
    """A phase's environment: a target whose port refuses (nothing listens on port 1) and the tiny profile's settings;
    returns the target, as set in $TPU_SFT_TARGET."""
    (tmp_path / "key").write_text("never read\n")
    (tmp_path / "known_hosts").write_text("")
    target = {
        "host": "127.0.0.1",
        "port": 1,
        "user": "tester",
        "key_path": str(tmp_path / "key"),
        "known_hosts": str(tmp_path / "known_hosts"),
        "connect_timeout": 0.5,
    }
    monkeypatch.setenv("TPU_SFT_TARGET", json.dumps(target))
    monkeypatch.setenv("TPU_SFT_PIPELINE", json.dumps({"profile": "tiny", "steps": 2}))
    return target
