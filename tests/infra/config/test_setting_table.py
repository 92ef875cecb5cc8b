"""The infrastructure settings are one table (infra/config/setting_table.py), and Pulumi.dev.yaml documents it: every
key the program knows appears there, set or commented, with a value its parser accepts, and no key there is unknown."""

import json
import re

import pytest
import yaml

from infra.config import data_size, read_settings
from infra.config.setting_table import BY_KEY, SETTINGS
from tests.fixtures.mock_engine import DEV_STACK
from workload.core.config import BY_KEY as PIPELINE_SETTINGS

TOKEN = "hf_" + "Abc123" * 6
# A key set or shown, commented, at the top level of the stack's config: `  tpu-sft:steps: ...`, `  # tpu-sft:...`.
_KEY_LINE = re.compile(r"  (# )?(tpu-sft:[A-Za-z]+):.*")
_CONTINUED = re.compile(r"  #   .*")  # a commented key's nested value (`#   secure: ...`)
# What a commented key needs besides itself to be accepted.
_COMPANIONS = {
    "tpu-sft:osLoginAccount": {"tpu-sft:sshAccess": "oslogin"},
    "tpu-sft:evalData": {"tpu-sft:dataset": "./chats.jsonl"},  # held-out files are a file dataset's
    # an adapter's shape and repo are a LoRA run's, which Tunix's loop trains
    **dict.fromkeys(
        ("tpu-sft:loraRank", "tpu-sft:loraAlpha", "tpu-sft:loraModules", "tpu-sft:publishHubAdapterRepo"),
        {"tpu-sft:tuning": "lora", "tpu-sft:trainer": "tunix"},
    ),
    "tpu-sft:loraWeightQtype": {"tpu-sft:tuning": "qlora", "tpu-sft:trainer": "tunix"},  # QLoRA's frozen weights
}


def _documented() -> list[tuple[str, bool, object]]:
    """(key, whether commented, value) for every key line of Pulumi.dev.yaml; a commented one's value is its lines
    uncommented, read as YAML."""
    lines = DEV_STACK.read_text().splitlines()
    found = []
    for i, line in enumerate(lines):
        match = _KEY_LINE.fullmatch(line)
        if not match:
            continue
        commented, key = bool(match[1]), match[2]
        block = [line]
        while commented and i + len(block) < len(lines) and _CONTINUED.fullmatch(lines[i + len(block)]):
            block.append(lines[i + len(block)])
        text = "\n".join(b.replace("# ", "", 1) if commented else b for b in block)
        found.append((key, commented, yaml.safe_load(text)[key]))
    return found


def test_every_known_key_is_in_the_dev_stack_and_every_key_there_is_known():
    documented = {key for key, _, _ in _documented()}
    known = {f"tpu-sft:{key}" for key in (*BY_KEY, *PIPELINE_SETTINGS)}
    assert sorted(known - documented) == [], "keys the program knows that Pulumi.dev.yaml does not show"
    assert sorted(documented - known) == [], "keys in Pulumi.dev.yaml that the program does not know"


@pytest.mark.parametrize(
    ("key", "value"),
    [(k, v) for k, commented, v in _documented() if commented],
    ids=[k for k, commented, _ in _documented() if commented],
)
def test_every_commented_value_is_accepted(dev_config, key, value, tmp_path, monkeypatch):
    if isinstance(value, dict) and set(value) == {"secure"}:  # a secret, as `pulumi config set --secret` writes it
        parsed = read_settings.parse({**dev_config, key: TOKEN}, stack="dev", secret_keys=frozenset({key}))
        assert TOKEN in (parsed.hf_token, parsed.hf_write_token)
        return
    text = value if isinstance(value, str) else json.dumps(value)
    raw = {**dev_config, **_COMPANIONS.get(key, {}), key: text}
    if key == "tpu-sft:epochs":  # `pulumi up` counts them in the size scripts/preflight --data kept of the data
        monkeypatch.chdir(tmp_path)
        data_size.keep(data_size.data_settings(raw), epoch_tokens=16_384_000, exact=True)
        raw = data_size.epochs_as_tokens(raw)[0]
    read_settings.parse(raw, stack="dev")


def test_the_table_has_one_row_per_key_each_with_a_one_line_description():
    assert len(BY_KEY) == len(SETTINGS)
    assert not set(BY_KEY) & set(PIPELINE_SETTINGS)
    for row in SETTINGS:
        assert row.description and "\n" not in row.description, row.key
