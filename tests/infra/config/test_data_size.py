"""`tpu-sft:epochs` (infra/config/data_size.py): counted in the size of the data that scripts/preflight --data kept, it
reaches every phase as tokens; without a kept size it is refused before anything is declared. The size is the
data's: the same at any batch, length or accelerator, another for a changed file."""

from __future__ import annotations

import json

import pytest
from pulumi import RunError

from infra.config import data_size
from infra.config.read_settings import parse
from infra.preflight import data_preflight
from tests.fixtures.datasets import good_rows, write_jsonl
from tests.fixtures.mock_engine import recorded_inputs
from workload.core.config import ConfigError, PipelineConfig

COMMAND = "command:local:Command"
EPOCH_TOKENS = 8_192_000  # half the default run's tokens on a v6e-8


@pytest.fixture
def kept(tmp_path, monkeypatch):
    """Where sizes are kept: this test's own folder, as the project's `.tpu-sft/preflight` is for `pulumi up`."""
    monkeypatch.setattr(data_size, "CACHE", tmp_path / "preflight")
    return tmp_path / "preflight"


def handed(stack) -> PipelineConfig:
    (task,) = [r for r in stack.of_type(COMMAND) if r.name.endswith("-train")]
    return PipelineConfig.from_mapping(json.loads(task.inputs["environment"]["TPU_SFT_PIPELINE"]))


def test_epochs_reach_the_phases_as_the_tokens_of_the_kept_size(mock_stack, dev_config, kept):
    data_size.keep(data_size.data_settings(dev_config), EPOCH_TOKENS, exact=False)
    stack = mock_stack({"tpu-sft:epochs": "2.5"})
    pipeline = handed(stack)
    assert (pipeline.epochs, pipeline.tokens) == (None, 20_480_000)  # 2.5 x 8,192,000
    assert pipeline.steps == 313  # 20,480,000 over 4 x 2,048 on 8 chips: 312.5, the last step a whole one
    assert stack.outputs["runLength"] == {
        "steps": 313,
        "tokensPerStep": 65536,
        "tokens": 20_512_768,  # what 313 whole steps train
        "epochs": 2.5,
        "epochTokens": EPOCH_TOKENS,
        "epochCounted": "estimated from a sample",
    }
    # The same tokens given as tokens are the same inputs: nothing re-runs.
    assert recorded_inputs(stack) == recorded_inputs(mock_stack({"tpu-sft:tokens": "20480000"}))


def test_more_epochs_rerun_train_and_export_only(mock_stack, dev_config, kept):
    data_size.keep(data_size.data_settings(dev_config), EPOCH_TOKENS, exact=True)
    before, after = (recorded_inputs(mock_stack({"tpu-sft:epochs": e})) for e in ("1", "2"))
    assert {phase for phase in before if before[phase] != after[phase]} == {"train", "export", "eval"}


def test_epochs_without_a_kept_size_are_refused_in_one_line(mock_stack, kept):
    with pytest.raises(RunError) as raised:
        mock_stack({"tpu-sft:epochs": "1"})
    message = str(raised.value)
    assert message.startswith("tpu-sft:epochs: counts passes over the training data, whose size no scripts/preflight")
    assert "Fix: run scripts/preflight --data, or pulumi config rm tpu-sft:epochs" in message and "\n" not in message


def test_the_size_is_the_datas_whatever_the_length_batch_or_accelerator(dev_config, tmp_path):
    data = write_jsonl(tmp_path / "chats.jsonl", good_rows(20))
    raw = {**dev_config, "tpu-sft:dataset": str(data), "tpu-sft:evalData": "10%"}
    key = data_size.size_key(data_size.data_settings(raw))
    for other in ({"tpu-sft:perDeviceBatchSize": "4"}, {"tpu-sft:acceleratorType": "v6e-16"}, {"tpu-sft:epochs": "3"}):
        assert data_size.size_key(data_size.data_settings({**raw, **other})) == key
    assert data_size.size_key(data_size.data_settings({**raw, "tpu-sft:maxTargetLength": "1024"})) != key
    write_jsonl(data, good_rows(21))  # the same path, other content
    assert data_size.size_key(data_size.data_settings(raw)) != key


def test_the_size_a_data_preflight_keeps_is_the_one_pulumi_up_looks_up(dev_config, tmp_path):
    """scripts/preflight --data keeps it by the settings it parsed without the length
    (infra/preflight/data_preflight.py); `pulumi up` looks it up by the stack's config with epochs in it."""
    data = write_jsonl(tmp_path / "chats.jsonl", good_rows(20))
    (tmp_path / "chat.jinja").write_text("{{ messages }}")
    raw = {**dev_config, "tpu-sft:dataset": str(data), "tpu-sft:evalData": "10%"}
    raw |= {"tpu-sft:chatTemplate": str(tmp_path / "chat.jinja"), "tpu-sft:maxTargetLength": "1024"}
    checked = parse(raw, stack="dev").pipeline
    assert data_size.size_key(checked) == data_size.size_key(data_size.data_settings({**raw, "tpu-sft:epochs": "2"}))


def test_two_forms_of_the_length_are_refused_before_any_size_is_read(dev_config, kept):
    with pytest.raises(ConfigError, match=r"^tpu-sft:epochs: is set and so is tpu-sft:tokens"):
        data_size.epochs_as_tokens({**dev_config, "tpu-sft:epochs": "1", "tpu-sft:tokens": "5"})


def test_a_data_preflight_of_the_data_is_found_whatever_the_length(dev_config):
    """Its findings are kept by the train inputs but the length: epochs, counted in this very check, become tokens
    that find the same record."""
    by_tokens = PipelineConfig.from_mapping({"tokens": 20_480_000})
    assert data_preflight.data_fingerprint(by_tokens) == data_preflight.data_fingerprint(PipelineConfig())
    assert data_preflight.data_fingerprint(PipelineConfig(per_device_batch_size=2)) != data_preflight.data_fingerprint(
        PipelineConfig()
    )
