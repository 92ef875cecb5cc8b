"""What keep records of a dataset of files for the model card: each file's name, rows (JSON Lines: a non-empty
line a row, as the data preflight counts) and sha256; a Hub dataset records nothing; a file that cannot be read is
one line, and keep goes on."""

from __future__ import annotations

import hashlib

from workload.run import data_files
from workload.run.data_files import describe

ROW = '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}'


def test_each_file_of_a_pattern_by_name_rows_and_sha256(tmp_path):
    (tmp_path / "b.jsonl").write_text(f"{ROW}\n\n{ROW}\n   \n{ROW}")  # blank lines are no rows; no final newline
    (tmp_path / "a.jsonl").write_text(f"{ROW}\n")
    (tmp_path / "notes.txt").write_text("not data")
    data = (tmp_path / "b.jsonl").read_bytes()
    assert describe(f"{tmp_path}/*.jsonl") == {
        "files": [
            {
                "name": "a.jsonl",
                "rows": 1,
                "sha256": hashlib.sha256(f"{ROW}\n".encode()).hexdigest(),
                "bytes": len(ROW) + 1,
            },
            {"name": "b.jsonl", "rows": 3, "sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)},
        ]
    }


def test_a_hub_dataset_records_nothing_and_an_unreadable_file_is_one_line(tmp_path, monkeypatch):
    assert describe("HuggingFaceH4/ultrachat_200k") is None and describe(None) is None
    assert describe(f"{tmp_path}/none-*.jsonl") == {"error": f"{tmp_path}/none-*.jsonl names no file"}
    (tmp_path / "a.jsonl").write_text(ROW)

    def broken(*_args):
        raise OSError("the disk went away\nsecond line")

    monkeypatch.setattr(data_files, "_describe_one", broken)
    assert describe(f"{tmp_path}/a.jsonl") == {"error": "OSError: the disk went away"}
