"""`python -m workload.preflight.data` (real `datasets` and `transformers` in .maxtext-venv): the table for a good
dataset, JSON Lines and Parquet, and each kind of bad data stopped in one line naming the key and the fix."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.fixtures.datasets import good_rows, write_jsonl
from tests.hub_download_standin import serving
from workload.core.contract import EXIT_BAD_INPUT
from workload.tiny.assets import CHAT_TEMPLATE

REPO = Path(__file__).resolve().parents[3]
TINY = {"profile": "tiny", "steps": 30, "maxTargetLength": 128, "acceleratorType": "v6e-1"}
SEQUENCE = TINY["maxTargetLength"]
UNGRANTED = "hf_" + "NotGranted" * 3


def preflight(
    python: str, tmp: Path, settings: dict, env: dict | None = None, rows: int | None = None
) -> tuple[int, list[str], dict | None]:
    """(exit status, its stderr's finding lines, its JSON line)."""
    (tmp / "settings.json").write_text(json.dumps(settings))
    done = subprocess.run(
        [python, "-m", "workload.preflight.data", "--settings", str(tmp / "settings.json")]
        + ([] if rows is None else ["--rows", str(rows)]),
        cwd=tmp,  # a Hub-shaped id names a folder here first, as `datasets` reads it
        env={**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )
    findings = [line for line in done.stderr.splitlines() if line.startswith("preflight --data: ")]
    lines = done.stdout.splitlines()
    return done.returncode, findings, json.loads(lines[-1]) if lines and lines[-1].startswith("{") else None


def write_parquet(python: str, path: Path, rows: list[dict]) -> Path:
    """With the MaxText venv's pyarrow (the project's venv has none)."""
    script = (
        "import json, sys, pyarrow as pa, pyarrow.parquet as pq;"
        "pq.write_table(pa.Table.from_pylist(json.load(sys.stdin)), sys.argv[1])"
    )
    subprocess.run([python, "-c", script, str(path)], input=json.dumps(rows), text=True, check=True)
    return path


def test_a_good_jsonl_file_gives_the_table(maxtext_python, tmp_path):
    data = write_jsonl(tmp_path / "chats.jsonl", good_rows(40))
    (tmp_path / "chat.jinja").write_text(CHAT_TEMPLATE)  # the tiny tokenizer's own, as the user's file
    settings = {**TINY, "dataset": str(data), "evalData": "10%", "chatTemplate": str(tmp_path / "chat.jinja")}
    status, findings, result = preflight(maxtext_python, tmp_path, settings)
    assert (status, findings) == (0, []), findings
    assert result is not None and result["ok"]
    table = result["table"]
    assert table["rows read"] == table["rows in all"] == 36 and table["held-out rows read"] == 4
    median, p95, longest = table["tokens per conversation (median, p95, max)"]
    assert 0 < median <= p95 <= longest < 128 and table["truncated at maxTargetLength 128"] == 0
    assert 0 < table["completion tokens kept (completion-only loss)"] < 1 and 0 < table["packing density"] <= 1
    # Every row read: the epoch's size is exact, whole sequences of 128 positions, fewer than the 36 conversations
    # (packed several to a sequence), and the conversations' tokens fill the packing density's share of them.
    epoch = result["epoch_tokens"]
    assert result["epoch_tokens_exact"] and table["epoch counted"] == "exactly"
    assert table["tokens in an epoch (packed positions)"] == epoch and epoch % SEQUENCE == 0
    assert SEQUENCE <= epoch < 36 * SEQUENCE and epoch * table["packing density"] >= 36 * median / 2
    assert table["held-out rows also in training"] == 0


def test_an_epoch_of_a_file_read_in_part_is_estimated_from_the_rows_read(maxtext_python, tmp_path):
    data = write_jsonl(tmp_path / "chats.jsonl", good_rows(40))
    status, _, part = preflight(maxtext_python, tmp_path, {**TINY, "dataset": str(data), "evalInterval": 0}, rows=10)
    assert status == 0 and part is not None
    assert part["table"]["rows read"] == 10 and part["table"]["rows in all"] == 40
    assert not part["epoch_tokens_exact"] and part["table"]["epoch counted"] == "estimated from the rows read"
    # The sample's whole sequences, scaled from its 10 rows to the file's 40.
    assert part["epoch_tokens"] % (4 * SEQUENCE) == 0 and part["epoch_tokens"] > 0


def test_a_good_parquet_file_and_its_bad_twin(maxtext_python, tmp_path):
    good = write_parquet(maxtext_python, tmp_path / "chats.parquet", good_rows(20))
    held_out = write_parquet(maxtext_python, tmp_path / "held-out.parquet", good_rows(3))
    status, findings, _ = preflight(maxtext_python, tmp_path, {**TINY, "dataset": str(good), "evalData": str(held_out)})
    assert (status, findings) == (0, [])
    bad = write_parquet(maxtext_python, tmp_path / "bad.parquet", [{"text": "hello"}] * 3)
    status, findings, _ = preflight(maxtext_python, tmp_path, {**TINY, "dataset": str(bad), "evalData": str(held_out)})
    assert status == 1 and len(findings) == 1
    assert findings[0].startswith(f"preflight --data: tpu-sft:dataset: {bad}: row 1 has no column 'messages'")
    assert "Fix:" in findings[0]


@pytest.mark.parametrize(
    ("content", "words"),
    [("", "has no rows"), ('{"messages": [\n', "cannot be read")],
    ids=["empty", "malformed"],
)
def test_an_empty_or_unreadable_file_is_one_line(maxtext_python, tmp_path, content, words):
    (tmp_path / "chats.jsonl").write_text(content)
    settings = {**TINY, "dataset": str(tmp_path / "chats.jsonl"), "evalInterval": 0}
    status, findings, _ = preflight(maxtext_python, tmp_path, settings)
    assert status == 1 and len(findings) == 1 and findings[0].startswith("preflight --data: tpu-sft:dataset: ")
    assert words in findings[0] and "\n" not in findings[0]


def test_a_split_that_does_not_exist(maxtext_python, tmp_path):
    (tmp_path / "someone" / "chats").mkdir(parents=True)
    write_jsonl(tmp_path / "someone" / "chats" / "train.jsonl", good_rows(10))
    settings = {**TINY, "dataset": "someone/chats", "trainSplit": "train_sft", "evalInterval": 0}
    status, findings, _ = preflight(maxtext_python, tmp_path, settings)
    assert status == 1 and len(findings) == 1
    assert findings[0].startswith("preflight --data: tpu-sft:trainSplit: someone/chats has no split 'train_sft'")


def test_a_gated_model_without_access_is_refused_and_the_token_never_shown(maxtext_python, tmp_path):
    data = write_jsonl(tmp_path / "chats.jsonl", good_rows(10))
    settings = {"dataset": str(data), "evalData": "10%"}  # the full profile: Gemma's gated weights
    with serving(
        "google/gemma-3-4b-it", {"config.json": b"{}"}, token="hf_" + "Other" * 6, ungranted=frozenset({UNGRANTED})
    ) as hub:
        status, findings, result = preflight(
            maxtext_python,
            tmp_path,
            settings,
            {"HF_ENDPOINT": hub.endpoint, "HF_TOKEN": UNGRANTED, "HF_HUB_OFFLINE": "0"},
        )
    assert status == 1 and findings == [
        "preflight --data: tpu-sft:hfToken: the token's account has not been granted access to the gated model "
        "google/gemma-3-4b-it. Fix: accept the licence at https://huggingface.co/google/gemma-3-4b-it signed in as "
        "the token's owner"
    ]
    assert UNGRANTED not in json.dumps(result) and UNGRANTED not in "".join(findings)


def test_bad_settings_are_bad_input(maxtext_python, tmp_path):
    status, findings, _ = preflight(maxtext_python, tmp_path, {"steps": 0})
    assert status == EXIT_BAD_INPUT and findings[0].startswith("preflight --data: tpu-sft:steps:")


def test_scripts_preflight_data_keeps_the_answer_that_pulumi_up_refuses_by(maxtext_python, tmp_path, monkeypatch):
    from infra.preflight import compile_step, data_preflight

    monkeypatch.setenv("PREFLIGHT_PYTHON", maxtext_python)
    monkeypatch.setattr(data_preflight, "CACHE", tmp_path / "preflight")
    data = write_jsonl(tmp_path / "chats.jsonl", good_rows(10))
    overrides = ["tpu-sft:profile=tiny", f"tpu-sft:dataset={data}", "tpu-sft:evalData=10%"]
    assert compile_step.main(["--data", str(REPO / "Pulumi.dev.yaml"), *overrides]) == 0
    (record,) = (tmp_path / "preflight").glob("data-*.json")
    assert json.loads(record.read_text())["ok"] is True


@pytest.mark.parametrize(
    ("settings", "why"),
    [
        ({"dataset": "gs://acme-chats/sft/*.jsonl", "evalInterval": 0}, "reading it needs an HF token"),
        ({**TINY, "dataset": "gs://acme-chats/sft/*.jsonl", "evalInterval": 0}, "reading it needs Google credentials"),
        ({**TINY, "dataset": "nobody/private-chats", "evalInterval": 0}, "cannot be read without an HF token"),
    ],
    ids=["gated tokenizer", "bucket", "private hub dataset"],
)
def test_public_only_says_what_it_could_not_check_and_uses_no_token(maxtext_python, tmp_path, settings, why):
    """A pull request's check: what needs a credential is not checked, said in one line, and is no finding."""
    (tmp_path / "settings.json").write_text(json.dumps(settings))
    done = subprocess.run(
        [maxtext_python, "-m", "workload.preflight.data", "--settings", "settings.json", "--public-only"],
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(REPO), "HF_HUB_OFFLINE": "1", "HF_TOKEN": UNGRANTED},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.splitlines()[-1])
    assert answer["ok"] and answer["findings"] == [] and why in answer["not_checked"]
    assert done.stderr.splitlines() == [f"preflight --data: not checked: {answer['not_checked']}"]
    assert UNGRANTED not in done.stdout + done.stderr


def _plan_comment(tmp_path: Path, capsys, head: dict[str, str]) -> str:
    """scripts/preflight --data --public-only on the head stack, then the plan comment made with its JSON line,
    as the pull request's two jobs make it (.github/workflows/preview.yml)."""
    from infra.plan import reruns
    from infra.preflight import compile_step

    dev = (REPO / "Pulumi.dev.yaml").read_text()
    (tmp_path / "base.yaml").write_text(dev)
    head_text = "".join(line for line in dev.splitlines(True) if not any(line.startswith(f"  {k}:") for k in head))
    (tmp_path / "head.yaml").write_text(head_text + "".join(f"  {k}: '{v}'\n" for k, v in head.items()))
    compile_step.main(["--data", "--public-only", str(tmp_path / "head.yaml")])
    (tmp_path / "data.json").write_text(capsys.readouterr().out.splitlines()[-1])
    base, head_file = str(tmp_path / "base.yaml"), str(tmp_path / "head.yaml")
    assert reruns.main(["--base", base, "--head", head_file, "--data", str(tmp_path / "data.json")]) == 0
    return capsys.readouterr().out


def test_the_pull_requests_data_check_reaches_the_plan_comment(maxtext_python, tmp_path, monkeypatch, capsys):
    from infra.preflight import data_preflight

    monkeypatch.setenv("PREFLIGHT_PYTHON", maxtext_python)
    monkeypatch.setattr(data_preflight, "CACHE", tmp_path / "preflight")
    good = write_jsonl(tmp_path / "chats.jsonl", good_rows(40))
    comment = _plan_comment(
        tmp_path, capsys, {"tpu-sft:profile": "tiny", "tpu-sft:dataset": str(good), "tpu-sft:evalData": "10%"}
    )
    assert comment.startswith("### tpu-sft: pipeline tasks") and "| rows read | 36 |\n" in comment
    assert "| held-out rows also in training | 0 |" in comment

    bad = write_parquet(maxtext_python, tmp_path / "bad.parquet", [{"text": "hello"}] * 3)
    comment = _plan_comment(
        tmp_path, capsys, {"tpu-sft:profile": "tiny", "tpu-sft:dataset": str(bad), "tpu-sft:evalInterval": "0"}
    )
    assert comment.startswith(
        "**The data preflight found what stops the run** (scripts/preflight --data):\n\n"
        f"- `tpu-sft:dataset`: {bad}: row 1 has no column 'messages' (its columns: text). Fix: "
    )
