"""remote/ssh/host_ids.py on files alone: which keys a new instance id forgets, and which it keeps. On real hosts, a
recreated one with a new host key: tests/rehearsal/test_slice_hosts.py."""

import json
import logging
from concurrent.futures import ProcessPoolExecutor

import pytest

from remote.ssh.errors import TargetError
from remote.ssh.host_ids import forget_if_rebuilt, ids_path

KEYS = [
    "tpu-sft-dev-01 ssh-ed25519 AAAAone\n",
    "tpu-sft-dev-02 ssh-ed25519 AAAAtwo\n",
    "@revoked tpu-sft-dev-02,other ssh-ed25519 AAAArevoked\n",
    "# tpu-sft-dev-02 a comment\n",
    "[tpu-sft-dev-02]:2222 ssh-ed25519 AAAAport\n",
]


@pytest.fixture
def known(tmp_path):
    path = tmp_path / "known_hosts"
    path.write_text("".join(KEYS))
    return path


def test_a_first_id_is_recorded_and_forgets_nothing(known):
    assert forget_if_rebuilt(str(known), "tpu-sft-dev-02", "2") is None
    assert known.read_text() == "".join(KEYS)
    assert json.loads(open(ids_path(str(known))).read()) == {"tpu-sft-dev-02": "2"}


def test_the_same_id_again_forgets_nothing(known):
    forget_if_rebuilt(str(known), "tpu-sft-dev-02", "2")
    assert forget_if_rebuilt(str(known), "tpu-sft-dev-02", "2") is None
    assert known.read_text() == "".join(KEYS)


def test_a_new_id_forgets_that_hosts_keys_only_and_says_so(known, caplog):
    caplog.set_level(logging.WARNING, "remote")
    forget_if_rebuilt(str(known), "tpu-sft-dev-01", "1")
    forget_if_rebuilt(str(known), "tpu-sft-dev-02", "2")
    assert forget_if_rebuilt(str(known), "tpu-sft-dev-02", "3") == "2"
    assert known.read_text() == "".join([KEYS[0], *KEYS[2:]])  # the other host's, a revocation, a comment, a port's
    assert json.loads(open(ids_path(str(known))).read()) == {"tpu-sft-dev-01": "1", "tpu-sft-dev-02": "3"}
    assert "tpu-sft-dev-02: a new instance (id 3, was 2)" in caplog.text


def test_a_first_use_creates_the_folder_and_the_file(tmp_path):
    path = tmp_path / "not-yet" / "known_hosts"
    assert forget_if_rebuilt(str(path), "tpu-sft-dev-01", "1") is None
    assert path.read_text() == "" and (tmp_path / "not-yet").stat().st_mode & 0o777 == 0o700


@pytest.mark.parametrize("content", ["not json", "[]"])
def test_an_unreadable_record_is_a_target_error_with_the_fix(known, content):
    open(ids_path(str(known)), "w").write(content)
    with pytest.raises(TargetError, match="is not a JSON object of instance ids. Fix: remove it"):
        forget_if_rebuilt(str(known), "tpu-sft-dev-02", "2")


def record_many(known_hosts: str, worker: int) -> None:
    for host in range(30):
        forget_if_rebuilt(known_hosts, f"w{worker}-h{host}", "1")


def test_workers_recording_at_once_lose_no_id(tmp_path):
    """A slice's workers connect in parallel, each recording its own host's id in the one file."""
    known = str(tmp_path / "known_hosts")
    with ProcessPoolExecutor(8) as pool:
        list(pool.map(record_many, [known] * 8, range(8)))
    assert len(json.loads(open(ids_path(known)).read())) == 8 * 30
