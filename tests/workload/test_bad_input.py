"""Bad input to `python -m workload`, case by case: one line on stderr or in the summary naming the problem, exit 2,
never a traceback; `run` still ends its stdout with the summary, and creates no directory."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@dataclass(frozen=True)
class Case:
    id: str
    argv: tuple[str, ...]  # "{cfg}" is a settings file holding `settings`; "{tmp}" this run's directory
    expect: str
    settings: object = None  # JSON-encoded into {cfg}; a str is written as it is


def run_case(id_, settings, expect, *extra) -> Case:
    return Case(
        id_,
        ("run", "--config", "{cfg}", "--work-dir", "{tmp}/work", "--output-dir", "{tmp}/out", *extra),
        expect,
        settings,
    )


LR_REFUSED = "tpu-sft:learningRate: expected a number of at least 0"

CASES = [
    run_case("config-list", [], "settings JSON must be an object"),
    run_case("config-null", None, "settings JSON must be an object"),
    run_case("config-number", 5, "settings JSON must be an object"),
    run_case("config-string", '"steps"', "settings JSON must be an object"),
    run_case("config-not-json", "{steps", "cannot read settings JSON"),
    run_case("config-not-utf8", b"\xff\xfe{}", "cannot read settings JSON"),
    run_case("steps-arabic-digits", {"steps": "٣"}, "tpu-sft:steps: expected a whole number"),
    run_case("steps-fullwidth-digits", {"steps": "１０"}, "tpu-sft:steps: expected a whole number"),
    run_case("steps-trailing-newline", {"steps": "10\n"}, "tpu-sft:steps: expected a whole number"),
    run_case("steps-underscore", {"steps": "1_000"}, "tpu-sft:steps: expected a whole number"),
    run_case("steps-negative", {"steps": -1}, "tpu-sft:steps: must be at least 1"),
    run_case("steps-float", {"steps": 1.5}, "tpu-sft:steps: expected a whole number"),
    run_case("steps-bool", {"steps": True}, "tpu-sft:steps: expected a whole number"),
    run_case("steps-list", {"steps": [1]}, "tpu-sft:steps: expected a whole number"),
    run_case("batch-zero", {"perDeviceBatchSize": 0}, "tpu-sft:perDeviceBatchSize: must be at least 1"),
    run_case("checkpoint-period-zero", {"checkpointPeriod": 0}, "tpu-sft:checkpointPeriod: must be at least 1"),
    run_case("max-target-length-small", {"maxTargetLength": "4"}, "tpu-sft:maxTargetLength: must be at least 8"),
    run_case("learning-rate-nan", {"learningRate": "nan"}, LR_REFUSED),
    run_case("learning-rate-inf", {"learningRate": "inf"}, LR_REFUSED),
    run_case("learning-rate-negative", {"learningRate": "-0.1"}, LR_REFUSED),
    run_case("learning-rate-newline", {"learningRate": "1e-3\n"}, LR_REFUSED),
    run_case("learning-rate-arabic", {"learningRate": "٠.١"}, LR_REFUSED),
    run_case("version-newline", {"maxtextVersion": "0.2.2\n"}, "tpu-sft:maxtextVersion"),
    run_case("version-arabic-digit", {"maxtextVersion": "0.2.٢"}, "tpu-sft:maxtextVersion"),
    run_case("version-extra", {"maxtextVersion": "0.2.2; rm -rf /"}, "tpu-sft:maxtextVersion"),
    run_case("dataset-non-ascii", {"dataset": "owner/ｎame"}, "tpu-sft:dataset"),
    run_case("dataset-newline", {"dataset": "owner/name\n"}, "tpu-sft:dataset"),
    run_case("split-newline", {"trainSplit": "train\n"}, "tpu-sft:trainSplit"),
    run_case("columns-string", {"trainDataColumns": 5}, "tpu-sft:trainDataColumns: expected a JSON list"),
    run_case("columns-number", {"trainDataColumns": [5]}, "tpu-sft:trainDataColumns: 5 is not a column name"),
    run_case("columns-empty", {"trainDataColumns": []}, "tpu-sft:trainDataColumns: must name at least one"),
    run_case("columns-non-ascii", {"trainDataColumns": ["méssages"]}, "tpu-sft:trainDataColumns"),
    run_case("run-name-newline", {"runName": "run\n"}, "tpu-sft:runName"),
    run_case("run-name-upper", {"runName": "Run"}, "tpu-sft:runName"),
    run_case("profile-unknown", {"profile": "huge"}, "tpu-sft:profile: 'huge' is not one of full, tiny"),
    run_case("model-unknown", {"model": "llama"}, "tpu-sft:model"),
    run_case("extras-not-bool", {"installPostTrainExtras": "yes"}, "tpu-sft:installPostTrainExtras"),
    run_case("unknown-key", {"stpes": 3}, "tpu-sft:stpes: is not a pipeline setting"),
    Case(
        "work-dir-a-file",
        ("run", "--config", "{cfg}", "--work-dir", "{tmp}/afile", "--output-dir", "{tmp}/out"),
        "--work-dir: {tmp}/afile is not a directory",
        {},
    ),
    Case(
        "output-dir-under-a-file",
        ("run", "--config", "{cfg}", "--work-dir", "{tmp}/w", "--output-dir", "{tmp}/afile/out"),
        "--output-dir: {tmp}/afile is a file",
        {},
    ),
    run_case("token-file-missing", {}, "HF token file {tmp}/none: No such file", "--hf-token-file", "{tmp}/none"),
    run_case("token-file-not-utf8", {}, "is not UTF-8 text", "--hf-token-file", "{tmp}/token-binary"),
    run_case("token-file-readable-by-others", {}, "is readable by others", "--hf-token-file", "{tmp}/token-open"),
    run_case("token-file-empty", {}, "is empty", "--hf-token-file", "{tmp}/token-empty"),
    run_case("until-unknown", {}, "argument --until: invalid choice: 'deploy'", "--until", "deploy"),
    run_case(
        "worker-id-alone", {}, "--worker-id/--worker-hostnames: one is given without the other", "--worker-id", "1"
    ),
    run_case(
        "worker-hostnames-alone",
        {},
        "--worker-id/--worker-hostnames: one is given without the other",
        "--worker-hostnames",
        "a,b",
    ),
    run_case(
        "worker-id-out-of-range",
        {"profile": "tiny"},
        "--worker-id: 2 is not a worker of 2",
        "--worker-id",
        "2",
        "--worker-hostnames",
        "a,b",
        "--runs-dir",
        "gs://b/runs",
    ),
    run_case(
        "worker-id-negative",
        {},
        "argument --worker-id: '-1' is not a worker id",
        "--worker-id=-1",
        "--worker-hostnames",
        "a,b",
    ),
    run_case(
        "worker-id-arabic",
        {},
        "argument --worker-id: '١' is not a worker id",
        "--worker-id",
        "١",
        "--worker-hostnames",
        "a,b",
    ),
    run_case(
        "worker-hostnames-twice",
        {"profile": "tiny"},
        "--worker-hostnames: lists a host twice",
        "--worker-id",
        "0",
        "--worker-hostnames",
        "a,a",
    ),
    run_case(
        "worker-hostnames-empty-name",
        {"profile": "tiny"},
        "--worker-hostnames: '' is not a hostname",
        "--worker-id",
        "0",
        "--worker-hostnames",
        "a,,b",
    ),
    run_case(
        "worker-hostname-with-space",
        {"profile": "tiny"},
        "--worker-hostnames: 'a b' is not a hostname",
        "--worker-id",
        "0",
        "--worker-hostnames",
        "a b,c",
    ),
    run_case(
        "workers-not-the-slice",
        {"acceleratorType": "v6e-16"},
        "--worker-hostnames: names 2 worker(s), but v6e-16 has 4 host(s)",
        "--worker-id",
        "0",
        "--worker-hostnames",
        "a,b",
        "--runs-dir",
        "gs://b/runs",
    ),
    run_case(
        "one-vm-given-workers",
        {},
        "--worker-hostnames: names 2 worker(s), but v6e-8 has 1 host(s)",
        "--worker-id",
        "0",
        "--worker-hostnames",
        "a,b",
    ),
    run_case(
        "slice-without-runs-dir",
        {"profile": "tiny"},
        "--runs-dir: is missing on a multi-host slice",
        "--worker-id",
        "0",
        "--worker-hostnames",
        "a,b",
    ),
    Case("run-without-config", ("run", "--output-dir", "{tmp}/out"), "the following arguments are required: --config"),
    Case("commands-config-list", ("commands", "--config", "{cfg}"), "settings JSON must be an object", []),
    run_case(
        "held-out-share-on-the-host",
        {"dataset": "/srv/chats.jsonl", "evalData": "5%"},
        "tpu-sft:evalData: is the share 5%, which `pulumi up` cuts",
    ),
    Case(
        "commands-held-out-share",
        ("commands", "--config", "{cfg}"),
        "tpu-sft:evalData: is the share 5%",
        {"dataset": "/srv/chats.jsonl", "evalData": "5%"},
    ),
    run_case("epochs-on-the-host", {"epochs": "2"}, "tpu-sft:epochs: are counted in the training data's tokens by"),
    Case(
        "commands-two-lengths",
        ("commands", "--config", "{cfg}"),
        "tpu-sft:steps: is set and so is tpu-sft:tokens",
        {"tokens": "100", "steps": "3"},
    ),
    run_case("dataset-no-format", {"dataset": "./data"}, "tpu-sft:dataset: './data' does not name .jsonl or .parquet"),
    Case("commands-steps-newline", ("commands", "--config", "{cfg}"), "tpu-sft:steps", {"steps": "5\n"}),
    Case("unknown-subcommand", ("deploy",), "invalid choice: 'deploy'"),
    Case("no-subcommand", (), "the following arguments are required: command"),
]


def _run(case: Case, tmp: Path) -> subprocess.CompletedProcess:
    directory = tmp / case.id
    directory.mkdir()
    (directory / "afile").write_text("a file\n")
    for name, content, mode in (
        ("token-binary", b"\xff\xfe", 0o600),
        ("token-open", b"hf_x", 0o644),
        ("token-empty", b"", 0o600),
    ):
        (directory / name).write_bytes(content)
        (directory / name).chmod(mode)
    config = directory / "settings.json"
    if isinstance(case.settings, bytes):
        config.write_bytes(case.settings)
    else:
        config.write_text(case.settings if isinstance(case.settings, str) else json.dumps(case.settings))
    argv = [a.replace("{cfg}", str(config)).replace("{tmp}", str(directory)) for a in case.argv]
    env = {k: v for k, v in os.environ.items() if k != "HF_TOKEN"}
    return subprocess.run(
        [sys.executable, "-m", "workload", *argv],
        capture_output=True,
        text=True,
        cwd=REPO,
        env=env,
        timeout=120,
        stdin=subprocess.DEVNULL,
    )


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory) -> dict[str, subprocess.CompletedProcess]:
    tmp = tmp_path_factory.mktemp("workload-bad-input")
    with ThreadPoolExecutor(max_workers=4) as pool:
        return dict(zip((case.id for case in CASES), pool.map(lambda case: _run(case, tmp), CASES), strict=True))


@pytest.mark.parametrize("case", CASES, ids=[case.id for case in CASES])
def test_bad_input_is_one_line_naming_the_problem(case, outcomes, tmp_path_factory):
    done = outcomes[case.id]
    directory = Path(str(tmp_path_factory.getbasetemp())) / "workload-bad-input0" / case.id
    expect = case.expect.replace("{tmp}", str(directory))
    assert "Traceback" not in done.stderr + done.stdout
    assert done.returncode == 2
    if case.argv[:1] == ("run",) and "--config" in case.argv and not case.expect.startswith("argument "):
        summary = json.loads(done.stdout.splitlines()[-1])  # the summary is the last line, even here
        assert summary["event"] == "summary" and summary["ok"] is False and summary["failed_step"] == "setup"
        assert expect in summary["error"] and "\n" not in summary["error"]
        assert not (directory / "work").exists() and not (directory / "out").exists()
    else:
        lines = done.stderr.strip().splitlines()
        assert len(lines) == 1 and expect in lines[0], done.stderr


def test_the_table_is_long_enough():
    assert len(CASES) >= 45 and len({case.id for case in CASES}) == len(CASES)
