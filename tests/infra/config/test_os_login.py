"""OS Login access, for organisations that enforce it (`compute.requireOsLogin` rejects enable-oslogin FALSE):
the stack's key registered to the account's login profile, OS Login on, and the account's POSIX user."""

import json

import pytest
from pulumi import RunError

from infra.config.ssh_key_trust import os_login_user
from tests.fixtures.mock_engine import tasks_of

INSTANCE = "gcp:compute/instance:Instance"
OS_LOGIN_KEY = "gcp:oslogin/sshPublicKey:SshPublicKey"
COMMAND = "command:local:Command"
OS_LOGIN = {"tpu-sft:sshAccess": "oslogin", "tpu-sft:osLoginAccount": "Jane.Doe@example.com"}


def test_metadata_mode_is_the_default(mock_stack, dev_config):
    stack = mock_stack()
    metadata = stack.one(INSTANCE).inputs["metadata"]
    assert metadata["enable-oslogin"] == "FALSE" and metadata["ssh-keys"].startswith("tpu-sft:ssh-ed25519 ")
    assert stack.of_type(OS_LOGIN_KEY) == []


def test_os_login_registers_the_key_and_logs_in_as_the_accounts_posix_user(mock_stack, dev_config):
    stack = mock_stack(OS_LOGIN, remove=("tpu-sft:sshUser",))  # the POSIX user comes from the account
    metadata = stack.one(INSTANCE).inputs["metadata"]
    assert metadata["enable-oslogin"] == "TRUE" and "ssh-keys" not in metadata
    key = stack.one(OS_LOGIN_KEY)
    assert key.inputs == {
        "user": "Jane.Doe@example.com",
        "key": dev_config["tpu-sft:sshPublicKey"],
        "project": "my-tpu-project",
    }
    commands = tasks_of(stack)
    targets = {json.loads(c.inputs["environment"]["TPU_SFT_TARGET"])["user"] for c in commands}
    assert targets == {"jane_doe_example_com"}
    [first] = [c for c in commands if c.name.endswith("-bootstrap")]  # the others run after it
    assert any("OsLoginKey" in d or d == key.urn for d in first.dependencies)  # no login before the key is there
    assert "jane_doe_example_com@tpu-sft-dev" in stack.outputs["gcloudSshCommand"]


def test_an_explicit_posix_user_wins(mock_stack):
    commands = tasks_of(mock_stack({**OS_LOGIN, "tpu-sft:sshUser": "ext_jane"}))
    assert {json.loads(c.inputs["environment"]["TPU_SFT_TARGET"])["user"] for c in commands} == {"ext_jane"}


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"tpu-sft:sshAccess": "oslogin"}, "tpu-sft:osLoginAccount"),
        ({"tpu-sft:sshAccess": "iap"}, "tpu-sft:sshAccess"),
        ({"tpu-sft:osLoginAccount": "me@example.com"}, "tpu-sft:osLoginAccount"),
        ({**OS_LOGIN, "tpu-sft:osLoginAccount": "not an account"}, "tpu-sft:osLoginAccount"),
        ({**OS_LOGIN, "tpu-sft:osLoginAccount": "runner@my-tpu-project.iam.gserviceaccount.com"}, "tpu-sft:sshUser"),
    ],
)
def test_os_login_settings_errors(mock_stack, overrides, key):
    with pytest.raises(RunError) as stopped:
        mock_stack(overrides, remove=("tpu-sft:sshUser",))
    assert str(stopped.value).startswith(f"{key}:") and "Fix:" in str(stopped.value)


def test_posix_names():
    assert os_login_user("me@example.com") == "me_example_com"
    assert os_login_user("a.b-c+d@corp.example.org") == "a_b_c_d_corp_example_org"
    assert os_login_user("sa@p.iam.gserviceaccount.com") is None
    assert os_login_user("a-very-long-name-indeed@example.com") is None  # 36 characters: Google shortens it
