"""Datasets from a local file, another bucket or the Hub: what the program declares for each, what every phase is
handed, and the refusals before anything is declared."""

import json

import pytest
from pulumi import RunError

from rehearsal.engine import Stack, run_program
from tests.fixtures.datasets import BROKEN_ROWS, good_rows, write_jsonl
from tests.fixtures.mock_engine import recorded_inputs
from workload.core.config import PipelineConfig

OBJECT = "gcp:storage/bucketObject:BucketObject"
MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
COMMAND = "command:local:Command"
STACK_BUCKET = "my-tpu-project-tpu-sft-dev-runs"
VM = "serviceAccount:123456789012-compute@developer.gserviceaccount.com"


def handed(stack, phase="train") -> PipelineConfig:
    (task,) = [r for r in stack.of_type(COMMAND) if r.name.endswith(f"-{phase}")]
    return PipelineConfig.from_mapping(json.loads(task.inputs["environment"]["TPU_SFT_PIPELINE"]))


def grants(stack):
    return sorted((m.inputs["bucket"], m.inputs["role"], m.inputs["member"]) for m in stack.of_type(MEMBER))


def test_a_local_file_is_copied_into_the_stacks_bucket_by_content_hash(mock_stack, tmp_path):
    data = write_jsonl(tmp_path / "chats.jsonl", good_rows())
    stack = mock_stack({"tpu-sft:dataset": str(data), "tpu-sft:evalData": "10%"})
    copies = {o.inputs["name"]: o for o in stack.of_type(OBJECT)}
    assert {name.rsplit("/", 1)[1] for name in copies} == {"train.jsonl", "held-out.jsonl"}
    assert all(o.inputs["bucket"] == STACK_BUCKET and name.startswith("data/") for name, o in copies.items())
    pipeline = handed(stack)
    train = next(n for n in copies if n.endswith("/train.jsonl"))
    assert pipeline.dataset == f"gs://{STACK_BUCKET}/{train}"  # the VM reads the copy, never the laptop's path
    assert pipeline.eval_data == f"gs://{STACK_BUCKET}/{train.replace('train.jsonl', 'held-out.jsonl')}"
    (task,) = [r for r in stack.of_type(COMMAND) if r.name.endswith("-bootstrap")]
    assert all(o.urn in task.dependencies for o in copies.values())  # copied before anything runs
    # The stack's own bucket needs no grant beyond the VM's own two (infra/resources/bucket.py).
    assert {g[0] for g in grants(stack)} == {STACK_BUCKET}


def test_the_held_out_share_is_cut_by_a_fixed_seed_and_shares_no_row(tmp_path):
    from infra.config.local_data import resolve

    data = write_jsonl(tmp_path / "chats.jsonl", good_rows(40))
    config = PipelineConfig.from_mapping({"dataset": str(data), "evalData": "10%"})
    first, again = resolve(config, "b"), resolve(config, "b")
    assert first == again
    train, held_out = (u.content or "" for u in first.uploads)
    assert len(held_out.splitlines()) == 4 and len(train.splitlines()) == 36
    assert not set(train.splitlines()) & set(held_out.splitlines())
    assert sorted(train.splitlines() + held_out.splitlines()) == sorted(data.read_text().splitlines())


def test_a_changed_file_reruns_train_and_export_and_the_same_file_nothing(mock_stack, tmp_path):
    data = write_jsonl(tmp_path / "chats.jsonl", good_rows())
    config = {"tpu-sft:dataset": str(data), "tpu-sft:evalData": "10%"}
    first = recorded_inputs(mock_stack(config))
    assert recorded_inputs(mock_stack(config)) == first  # the same file: no phase's input changes
    write_jsonl(data, good_rows(41))
    changed = recorded_inputs(mock_stack(config))
    assert {phase for phase in first if first[phase] != changed[phase]} == {"train", "export", "eval"}


def test_the_same_file_elsewhere_is_the_same_copy(mock_stack, tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    here = write_jsonl(tmp_path / "a" / "chats.jsonl", good_rows())
    there = write_jsonl(tmp_path / "b" / "chats.jsonl", good_rows())
    names = [
        [o.inputs["name"] for o in mock_stack({"tpu-sft:dataset": str(p), "tpu-sft:evalData": str(p)}).of_type(OBJECT)]
        for p in (here, there)
    ]
    assert names[0] == names[1] and len(names[0]) == 2


def test_a_dataset_in_another_bucket_gets_a_read_only_grant_on_that_bucket_alone(mock_stack):
    stack = mock_stack(
        {"tpu-sft:dataset": "gs://team-data/chats/*.jsonl", "tpu-sft:evalData": "gs://team-evals/held-out.jsonl"}
    )
    assert grants(stack) == [
        (STACK_BUCKET, "roles/storage.legacyBucketReader", VM),
        (STACK_BUCKET, "roles/storage.objectUser", VM),
        ("team-data", "roles/storage.objectViewer", VM),  # get and list objects: nothing written, no bucket read
        ("team-evals", "roles/storage.objectViewer", VM),
    ]
    assert stack.of_type(OBJECT) == []
    assert handed(stack).dataset == "gs://team-data/chats/*.jsonl"


@pytest.mark.parametrize(
    "dataset",
    ["HuggingFaceH4/ultrachat_200k", f"gs://{STACK_BUCKET}/mine/chats.jsonl"],
    ids=["hub", "stack-bucket"],
)
def test_no_grant_where_the_dataset_is_not_in_another_bucket(mock_stack, dataset):
    overrides = {"tpu-sft:dataset": dataset}
    if dataset.startswith("gs://"):
        overrides["tpu-sft:evalData"] = f"gs://{STACK_BUCKET}/mine/held-out.jsonl"
    assert {g[0] for g in grants(mock_stack(overrides))} == {STACK_BUCKET}


def test_a_slice_reads_another_bucket_with_its_hosts_identity(slice_stack):
    stack = slice_stack(
        overrides={"tpu-sft:dataset": "gs://team-data/chats.jsonl", "tpu-sft:evalData": "gs://team-data/h.jsonl"}
    )
    viewers = [g for g in grants(stack) if g[1] == "roles/storage.objectViewer"]
    assert [g[0] for g in viewers] == ["team-data"]
    (object_user,) = [g for g in grants(stack) if g[1] == "roles/storage.objectUser"]
    assert viewers[0][2] == object_user[2]  # the same identity the hosts use the stack's bucket with


def _refusal(dev_config, overrides) -> str:
    declared = Stack()
    with pytest.raises(RunError) as raised:
        run_program({**dev_config, **overrides}, into=declared)
    assert declared.resources == []  # refused before anything is declared
    message = str(raised.value)
    assert "\n" not in message and "Fix:" in message
    return message


@pytest.mark.parametrize("kind", list(BROKEN_ROWS))
def test_each_kind_of_bad_row_is_refused_in_one_line_naming_the_row(dev_config, tmp_path, kind):
    data = write_jsonl(tmp_path / "chats.jsonl", good_rows(), broken=kind)
    message = _refusal(dev_config, {"tpu-sft:dataset": str(data), "tpu-sft:evalData": "5%"})
    assert message.startswith(f"tpu-sft:dataset: {data}: row 3 ")
    assert BROKEN_ROWS[kind][1] in message


REFUSED = [
    ({"tpu-sft:dataset": "{tmp}/none.jsonl", "tpu-sft:evalData": "5%"}, "tpu-sft:dataset", "names no file"),
    ({"tpu-sft:dataset": "{tmp}/empty.jsonl", "tpu-sft:evalData": "5%"}, "tpu-sft:dataset", "has no rows"),
    ({"tpu-sft:dataset": "{tmp}/good.jsonl"}, "tpu-sft:evalData", "no held-out split"),
    ({"tpu-sft:dataset": "gs://team-data/x.jsonl", "tpu-sft:evalData": "5%"}, "tpu-sft:evalData", "only a local"),
    (
        {"tpu-sft:dataset": "gs://team-data/x.parquet", "tpu-sft:evalData": "gs://team-data/h.jsonl"},
        "tpu-sft:evalData",
        "one reader",
    ),
    ({"tpu-sft:dataset": "gs://team-data/x.csv"}, "tpu-sft:dataset", "does not name .jsonl or .parquet objects"),
    ({"tpu-sft:dataset": "gs://Bad_Bucket/x.jsonl"}, "tpu-sft:dataset", "not a Cloud Storage bucket name"),
    ({"tpu-sft:dataset": "./data"}, "tpu-sft:dataset", "does not name .jsonl or .parquet files"),
    ({"tpu-sft:evalData": "gs://team-data/h.jsonl"}, "tpu-sft:evalData", "is a Hub id, which holds out a split"),
    ({"tpu-sft:evalData": "60%"}, "tpu-sft:evalData", "at most 50%"),
    (
        {"tpu-sft:dataset": "{tmp}/good.jsonl", "tpu-sft:evalData": "5%", "tpu-sft:trainDataColumns": '["text"]'},
        "tpu-sft:trainDataColumns",
        "none of MaxText's SFT column sets",
    ),
]


@pytest.mark.parametrize(("overrides", "key", "words"), REFUSED, ids=[r[2] for r in REFUSED])
def test_bad_data_settings_are_refused_in_one_line(dev_config, tmp_path, overrides, key, words):
    write_jsonl(tmp_path / "good.jsonl", good_rows())
    (tmp_path / "empty.jsonl").write_text("\n")
    message = _refusal(dev_config, {k: v.replace("{tmp}", str(tmp_path)) for k, v in overrides.items()})
    assert message.startswith(f"{key}:") and words in message, message


def test_a_local_chat_template_is_copied_by_hash_and_a_changed_one_reruns_train(mock_stack, tmp_path):
    template = tmp_path / "chat.jinja"
    template.write_text("{% for m in messages %}{{ m['content'] }}{% endfor %}")
    config = {"tpu-sft:chatTemplate": str(template)}
    stack = mock_stack(config)
    (copy,) = stack.of_type(OBJECT)
    assert copy.inputs["name"].startswith("data/") and copy.inputs["name"].endswith("/chat.jinja")
    assert handed(stack).chat_template == f"gs://{STACK_BUCKET}/{copy.inputs['name']}"
    first = recorded_inputs(stack)
    template.write_text("{% for m in messages %}{{ m['role'] }}: {{ m['content'] }}{% endfor %}")
    changed = recorded_inputs(mock_stack(config))
    assert {phase for phase in first if first[phase] != changed[phase]} == {"train", "export", "eval"}


def test_a_chat_template_in_another_bucket_is_read_with_the_same_read_only_grant(mock_stack):
    stack = mock_stack({"tpu-sft:chatTemplate": "gs://team-templates/chat.jinja"})
    assert ("team-templates", "roles/storage.objectViewer", VM) in grants(stack)


def test_up_refuses_the_very_data_a_data_preflight_found_a_finding_in(dev_config, tmp_path, monkeypatch):
    from infra.config.local_data import resolve
    from infra.config.read_settings import parse
    from infra.preflight import data_preflight

    monkeypatch.setattr(data_preflight, "CACHE", tmp_path / "preflight")
    data = write_jsonl(tmp_path / "chats.jsonl", good_rows())
    config = {**dev_config, "tpu-sft:dataset": str(data), "tpu-sft:evalData": "5%"}
    settings = parse(config, stack="dev")
    finding = {"key": "tpu-sft:hfToken", "problem": "the token's account has not been granted access", "fix": "accept"}
    data_preflight.keep(
        data_preflight.record_path(resolve(settings.pipeline, settings.checkpoint_bucket).pipeline),
        {"ok": False, "findings": [finding], "table": {}},
    )
    declared = Stack()
    with pytest.raises(RunError) as raised:
        run_program(config, into=declared)
    assert str(raised.value).startswith("tpu-sft:hfToken: the token's account has not been granted access (scripts/")
    assert str(raised.value).endswith("Fix: accept") and declared.resources == []
    write_jsonl(data, good_rows(41))  # other data: no preflight has read it, nothing refuses it
    assert run_program(config).of_type(OBJECT)
