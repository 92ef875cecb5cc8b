"""A dataset of files, as MaxText's HF pipeline reads it: the argv for JSON Lines and Parquet, local or in a bucket,
and which rows MaxText's SFT accepts (workload/core/conversations.py)."""

import pytest

from tests.fixtures.datasets import BROKEN_ROWS, good_rows, write_jsonl
from workload.core.config import PipelineConfig
from workload.core.conversations import first_bad_row, row_problem
from workload.core.data_source import GCS, HUB, LOCAL, parse_source
from workload.run import commands
from workload.run.layout import Layout


def argv_of(settings: dict) -> dict[str, str]:
    config = PipelineConfig.from_mapping(settings)
    command = commands.train_sft(config, Layout("/scratch", "/kept", config.model, "run"))
    return dict(a.split("=", 1) for a in command.argv if "=" in a and not a.startswith("--"))


@pytest.mark.parametrize(
    ("value", "kind", "fmt"),
    [
        ("HuggingFaceH4/ultrachat_200k", HUB, None),
        ("gs://team-data/chats/*.jsonl", GCS, "json"),
        ("gs://team-data/chats/part-0.parquet", GCS, "parquet"),
        ("./chats.jsonl", LOCAL, "json"),
        ("data/chats.jsonl", LOCAL, "json"),  # an extension makes it a path, though it looks like owner/name
        ("/srv/data/*.parquet", LOCAL, "parquet"),
    ],
)
def test_a_dataset_value_is_one_of_three_places(value, kind, fmt):
    source = parse_source(value)
    assert (source.kind, source.format) == (kind, fmt)


def test_files_in_a_bucket_are_read_by_the_formats_builder_and_its_one_split():
    argv = argv_of({"dataset": "gs://team-data/chats/*.jsonl", "evalData": "gs://team-data/held-out.jsonl"})
    assert argv["hf_path"] == "json"
    assert argv["hf_train_files"] == "gs://team-data/chats/*.jsonl"
    assert argv["train_split"] == "train" and argv["hf_eval_split"] == "train"  # data_files' one split
    assert argv["hf_eval_files"] == "gs://team-data/held-out.jsonl"


def test_local_parquet_on_the_host_is_read_where_it_is():
    argv = argv_of({"dataset": "/srv/chats.parquet", "evalData": "/srv/held-out.parquet"})
    assert (argv["hf_path"], argv["hf_train_files"], argv["hf_eval_files"]) == (
        "parquet",
        "/srv/chats.parquet",
        "/srv/held-out.parquet",
    )


def test_a_hub_dataset_keeps_its_splits_and_names_no_files():
    argv = argv_of({"dataset": "someone/chats", "trainSplit": "train", "evalSplit": "validation"})
    assert (argv["hf_path"], argv["train_split"], argv["hf_eval_split"]) == ("someone/chats", "train", "validation")
    assert "hf_train_files" not in argv and "hf_eval_files" not in argv


def test_no_held_out_files_without_a_held_out_loss():
    argv = argv_of({"dataset": "gs://team-data/chats.jsonl", "evalInterval": 0})
    assert "hf_eval_files" not in argv and argv["eval_interval"] == "-1"


def test_a_good_file_has_no_bad_row(tmp_path):
    with open(write_jsonl(tmp_path / "good.jsonl", good_rows())) as f:
        assert first_bad_row(f, ("messages",), 1000) == (40, None)


@pytest.mark.parametrize("kind", list(BROKEN_ROWS))
def test_the_first_bad_row_is_named_with_why(tmp_path, kind):
    with open(write_jsonl(tmp_path / "bad.jsonl", good_rows(), broken=kind)) as f:
        read, bad = first_bad_row(f, ("messages",), 1000)
    assert read == 3 and bad is not None and bad.startswith("row 3 ") and BROKEN_ROWS[kind][1] in bad


def test_an_empty_file_and_the_limit(tmp_path):
    assert first_bad_row(["\n", "  \n"], ("messages",), 10) == (0, "has no rows")
    with open(write_jsonl(tmp_path / "bad.jsonl", good_rows(), broken="bad role")) as f:
        assert first_bad_row(f, ("messages",), 2) == (2, None)  # a bounded sample: row 3 is not read


@pytest.mark.parametrize(
    ("row", "words"),
    [
        ({"messages": [{"role": "assistant", "content": "hi"}]}, "user was due"),
        ({"messages": [{"role": "user", "content": "hi"}]}, "ends with a user turn"),
        (
            {"messages": [{"role": "user", "content": "a"}, {"role": "system", "content": "b"}]},
            "takes only first",
        ),
        ({"messages": []}, "not a non-empty list"),
        ({"messages": ["hi"]}, "not a {role, content} object"),
        ([1, 2], "not an object of columns"),
    ],
)
def test_what_maxtexts_chat_template_refuses(row, words):
    assert words in (row_problem(row, ("messages",)) or "")


def test_a_system_turn_first_and_pairs_of_columns_are_accepted():
    system = {"role": "system", "content": "Be brief."}
    assert row_problem({"messages": [system, *good_rows(1)[0]["messages"]]}, ("messages",)) is None
    assert row_problem({"question": "2+2?", "answer": "4"}, ("question", "answer")) is None
    assert "column 'answer' is empty" in (row_problem({"question": "2+2?", "answer": ""}, ("question", "answer")) or "")


def test_a_chat_template_is_read_from_the_file_the_train_step_places():
    argv = argv_of({"chatTemplate": "gs://team-data/chat.jinja"})
    assert argv["chat_template_path"] == "/scratch/chat-template.jinja"
    assert "chat_template_path" not in argv_of({})
