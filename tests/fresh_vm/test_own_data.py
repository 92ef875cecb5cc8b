"""The user's own data on their first `pulumi up` (issue 40's acceptance): the fresh-VM rehearsal trains on a local
JSON Lines file with a share held out (rehearsal/fresh_vm/own_data.py). The program's copies of it are written into
the stack's bucket as pulumi-gcp would (rehearsal/bucket_objects.py), MaxText on the VM reads them there with the
VM's own identity, measures the held-out loss on the held-out share, and the model is kept; `scripts/preflight
--data` gives the table for that same file with the stack's settings."""

from __future__ import annotations

import json
import re

import pytest

from infra.config import data_size
from infra.config.local_data import resolve
from infra.preflight import compile_step, data_preflight
from rehearsal.fresh_vm import own_data
from rehearsal.fresh_vm.rehearse import CONFIG, identity_overrides
from rehearsal.sshd import keygen
from workload.core.config import PipelineConfig
from workload.tiny.assets import SPEC

STEPS = 20  # the rehearsal stack's tpu-sft:steps
HELD_OUT_ROWS = SPEC["held_out"]
TRAINING_ROWS = own_data.ROWS - HELD_OUT_ROWS


def argument(argv: list[str], key: str) -> str:
    (value,) = [a.removeprefix(f"{key}=") for a in argv if a.startswith(f"{key}=")]
    return value


def test_the_file_is_the_tiny_conversations_and_the_share_holds_out_as_many_as_the_built_dataset(tmp_path):
    local = resolve(PipelineConfig.from_mapping({"dataset": str(own_data.write(tmp_path)), "evalData": "15%"}), "b")
    parts = {u.object_name.rsplit("/", 1)[1]: (u.content or "").splitlines() for u in local.uploads}
    assert {name: len(rows) for name, rows in parts.items()} == {
        "train.jsonl": TRAINING_ROWS,
        "held-out.jsonl": HELD_OUT_ROWS,
    }
    assert not set(parts["train.jsonl"]) & set(parts["held-out.jsonl"])
    assert own_data.overrides(tmp_path / own_data.FILE)["tpu-sft:evalData"] == "15%"


def test_the_programs_copies_are_in_the_stacks_bucket_by_content_hash(fresh_vm):
    objects = fresh_vm.run.data_objects
    assert sorted(name.rsplit("/", 1)[1] for name in objects) == ["held-out.jsonl", "train.jsonl"]
    (folder,) = {name.rsplit("/", 1)[0] for name in objects}
    assert re.fullmatch(r"data/[0-9a-f]{32}", folder)
    in_bucket = {name: size for name, size in fresh_vm.run.bucket_objects.items() if name.startswith("data/")}
    assert in_bucket == objects  # at the end of the run: nothing else was written there, nothing replaced them


def test_maxtext_on_the_vm_read_the_copies_in_the_bucket(fresh_vm):
    argv, objects = fresh_vm.run.train_argv, fresh_vm.run.data_objects
    assert "hf_path=json" in argv, argv
    (train,) = [n for n in objects if n.endswith("/train.jsonl")]
    (held_out,) = [n for n in objects if n.endswith("/held-out.jsonl")]
    assert re.fullmatch(rf"gs://[a-z0-9-]+/{train}", argument(argv, "hf_train_files"))
    assert re.fullmatch(rf"gs://[a-z0-9-]+/{held_out}", argument(argv, "hf_eval_files"))
    assert fresh_vm.run.storage_refusals == []  # with the VM's own grant on its stack's bucket


def test_the_held_out_loss_was_measured_on_the_share_and_the_model_kept(fresh_vm):
    summary = fresh_vm.run.summary
    curve = summary["eval_curve"]
    assert curve[0][0] == 0 and curve[-1][0] == STEPS, curve  # before the first step and after the last
    assert all(loss is not None for _, loss in curve), curve
    assert summary["learned"], curve
    assert summary["kept_dir"] and "manifest.json" in fresh_vm.run.kept_after_recreate  # still there, a boot later


@pytest.mark.maxtext
def test_the_data_preflight_gives_the_table_for_that_file(tmp_path, monkeypatch, capsys):
    """`scripts/preflight --data rehearsal/Pulumi.rehearsal.yaml` with the fresh-VM rehearsal's overrides: the same
    file (the same rows: the same content hash), the stack's settings, the tiny tokenizer in .maxtext-venv."""
    monkeypatch.setattr(data_preflight, "CACHE", tmp_path / "preflight")
    monkeypatch.setattr(data_size, "CACHE", tmp_path / "sizes")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    settings = {**identity_overrides(keygen(tmp_path / "id_ed25519")), **own_data.overrides(own_data.write(tmp_path))}
    overrides = [f"{key}={value}" for key, value in settings.items()]
    assert compile_step.main(["--data", str(CONFIG), *overrides]) == 0
    out = capsys.readouterr().out
    table = json.loads(out.splitlines()[-1])["table"]
    assert table["rows in all"] == table["rows read"] == TRAINING_ROWS
    assert table["held-out rows read"] == HELD_OUT_ROWS and table["held-out rows also in training"] == 0
    assert 0 < table["completion tokens kept (completion-only loss)"] < 1
    assert table["epoch counted"] == "exactly" and table["tokens in an epoch (packed positions)"] > 0
    assert re.search(rf"^rows in all +{TRAINING_ROWS}$", out, re.MULTILINE)  # the table itself, before the JSON line
    (kept,) = (tmp_path / "preflight").glob("data-*.json")
    assert json.loads(kept.read_text())["ok"]  # what `pulumi up` of this stack reads: nothing refuses it
    (size,) = (tmp_path / "sizes").glob("data-size-*.json")  # what it counts tpu-sft:epochs in
    assert json.loads(size.read_text()) == {
        "epoch_tokens": table["tokens in an epoch (packed positions)"],
        "exact": True,
    }
