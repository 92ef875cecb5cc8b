"""An error nobody expected inside `python -m workload run`: one line on stderr naming the log that holds the
traceback (without the HF token), the summary still the last stdout line, a non-zero exit."""

import json
import os

import workload.__main__ as workload_cli
from workload.core.contract import EXIT_UNEXPECTED

TOKEN = "hf_LastResortCanary" + "y" * 20


def test_an_unexpected_error_in_run_ends_with_the_summary_and_one_line(tmp_path, capsys, monkeypatch):
    def broken(context, until, summaries_at, boot_resume):
        raise KeyError(f"marker for {TOKEN}")

    monkeypatch.setattr(workload_cli, "run", broken)
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    (tmp_path / "settings.json").write_text('{"profile": "tiny"}')
    code = workload_cli.main(
        [
            "run",
            "--config",
            str(tmp_path / "settings.json"),
            "--work-dir",
            str(tmp_path / "w"),
            "--output-dir",
            str(tmp_path / "o"),
        ]
    )
    out, err = capsys.readouterr()
    assert code == EXIT_UNEXPECTED
    summary = json.loads(out.splitlines()[-1])
    assert summary["event"] == "summary" and summary["ok"] is False and "KeyError" in summary["error"]
    (line,) = err.strip().splitlines()
    assert line.startswith("workload: unexpected error (KeyError: 'marker for [REDACTED]'), a bug in tpu-sft")
    log_path = line.rsplit("the traceback is in ", 1)[1]
    logged = open(log_path).read()
    assert "Traceback" in logged and "in broken" in logged and TOKEN not in logged + out + err
    os.remove(log_path)
