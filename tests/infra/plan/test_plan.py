"""`python -m infra.plan`: which phases a config change re-runs, printed for a pull request."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

from infra.plan import reruns
from infra.plan.reruns import load
from infra.preflight.compile_step import train_fingerprint
from infra.preflight.data_preflight import data_fingerprint
from rehearsal.engine import ROOT
from tests.fixtures.datasets import good_rows, write_jsonl

DEV = (ROOT / "Pulumi.dev.yaml").read_text()
# The default length, the seed's 1,000 x 1 x 2,048 tokens per chip of a v6e-8, given twice over.
TOKENS_TWICE = {'# tpu-sft:tokens: "16384000"': 'tpu-sft:tokens: "32768000"'}


def _plan(tmp_path: Path, head_text: str, *more: str) -> subprocess.CompletedProcess:
    (tmp_path / "base.yaml").write_text(DEV)
    (tmp_path / "head.yaml").write_text(head_text)
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "infra.plan",
            "--base",
            str(tmp_path / "base.yaml"),
            "--head",
            str(tmp_path / "head.yaml"),
            *more,
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
    )


def _rerun(output: str) -> set[str]:
    return {line.split("|")[1].strip() for line in output.splitlines() if "| **yes** |" in line}


def _changed(**replacements: str) -> str:
    text = DEV
    for old, new in replacements.items():
        assert old in text
        text = text.replace(old, new)
    return text


def test_the_runs_length_reruns_train_and_export_only(tmp_path):
    done = _plan(tmp_path, _changed(**TOKENS_TWICE))
    assert done.returncode == 0, done.stderr
    assert _rerun(done.stdout) == {"train", "export", "eval"}
    assert "| train | **yes** | `tokens`: null → 32768000 |" in done.stdout
    assert "| bootstrap | no |  |" in done.stdout and "| convert | no |  |" in done.stdout


def test_maxtext_version_reruns_every_phase(tmp_path):
    done = _plan(tmp_path, _changed(**{"tpu-sft:maxtextVersion: 0.2.3": "tpu-sft:maxtextVersion: 0.2.5"}))
    assert _rerun(done.stdout) == {"bootstrap", "convert", "train", "export", "eval"}
    assert '`maxtextVersion`: "0.2.3" → "0.2.5"' in done.stdout


def test_replaced_vm_reruns_every_phase(tmp_path):
    done = _plan(tmp_path, _changed(**{"gcp:zone: us-east5-b": "gcp:zone: us-east5-a"}))
    assert _rerun(done.stdout) == {"bootstrap", "convert", "train", "export", "eval"}
    assert "the VM is replaced" in done.stdout


def test_label_change_reruns_nothing(tmp_path):
    done = _plan(tmp_path, _changed(**{"owner: ml-platform": "owner: someone-else"}))
    assert done.returncode == 0
    assert _rerun(done.stdout) == set()


def test_cost_is_shown(tmp_path):
    done = _plan(tmp_path, _changed(**TOKENS_TWICE))
    assert "Estimated cost of a full run: $" in done.stdout


@pytest.mark.parametrize(
    ("head", "expected"),
    [("tpu-sft:tokens: '0'\n", "tpu-sft:tokens"), ("config: [\n", "is not valid YAML at line 2")],
)
def test_bad_config_is_one_line_exit_2(tmp_path, head, expected):
    text = DEV + "  " + head if "tokens" in head else head
    done = _plan(tmp_path, text)
    assert done.returncode == 2
    assert expected in done.stderr and done.stderr.count("\n") == 1


def test_json_rows_say_which_tasks_rerun(tmp_path):
    done = _plan(tmp_path, _changed(**TOKENS_TWICE), "--json")
    assert done.returncode == 0, done.stderr
    rows = json.loads(done.stdout)
    assert {row["task"] for row in rows if row["reruns"]} == {"train", "export", "eval"}
    assert rows[0] == {"task": "bootstrap", "reruns": False, "why": ""}


def _record(tmp_path: Path, head_text: str, **fields) -> Path:
    """A record as scripts/preflight writes it (tests/workload/preflight/test_preflight.py makes real ones), of
    `head_text`."""
    (tmp_path / "for-fingerprint.yaml").write_text(head_text)
    record = {
        "fits": True,
        "accelerator": "v6e-8",
        "hbm_bytes_per_chip": 18 * 2**30,
        "hbm_limit_bytes_per_chip": 32 * 2**30,
        "bounds": {"step_seconds_at_least": 0.053, "run_hours_at_least": 0.03, "usd_at_least": 0.64},
        "train_fingerprint": train_fingerprint(load(tmp_path / "for-fingerprint.yaml", "dev").pipeline),
        **fields,
    }
    path = tmp_path / "preflight.json"
    path.write_text(json.dumps(record))
    return path


def test_the_preflight_of_the_heads_train_inputs_is_shown_with_its_bounds(tmp_path):
    head = _changed(**TOKENS_TWICE)
    done = _plan(tmp_path, head, "--preflight", str(_record(tmp_path, head)))
    assert done.returncode == 0, done.stderr
    assert done.stdout.rstrip().endswith(
        "Preflight (the TPU compiler, no TPU): fits on a v6e-8: 18.00 GiB of HBM per chip of 32.00 GiB. At the "
        "chip's peak no step is faster than 0.053 s, no run shorter than 0.03 h or cheaper than $0.64 (bounds, "
        "not predictions)."
    )


def test_a_preflight_of_other_train_inputs_is_not_shown(tmp_path):
    done = _plan(tmp_path, _changed(**TOKENS_TWICE), "--preflight", str(_record(tmp_path, DEV)))
    assert done.returncode == 0, done.stderr
    assert "the record given is of other train inputs than this change's; not shown" in done.stdout
    assert "GiB" not in done.stdout


def test_a_file_that_is_no_preflight_record_is_one_line_exit_2(tmp_path):
    (tmp_path / "junk.json").write_text("[1, 2]")
    done = _plan(tmp_path, DEV, "--preflight", str(tmp_path / "junk.json"))
    assert done.returncode == 2
    assert done.stderr.startswith("error: --preflight: ") and done.stderr.count("\n") == 1


def _head_on_a_local_file(tmp_path: Path) -> tuple[str, Path]:
    """The head stack training on a real JSON Lines file (tests/fixtures/datasets.py), 10 % held out."""
    data = write_jsonl(tmp_path / "chats.jsonl", good_rows(40))
    head = _changed(
        **{
            "tpu-sft:dataset: HuggingFaceH4/ultrachat_200k": f"tpu-sft:dataset: {data}",
            "# tpu-sft:evalData: 5%": "tpu-sft:evalData: 10%",
        }
    )
    return head, data


def _data_record(tmp_path: Path, head_text: str, **fields) -> Path:
    """A record as scripts/preflight --data prints it (tests/workload/preflight/test_data_preflight.py makes real
    ones)."""
    (tmp_path / "for-fingerprint.yaml").write_text(head_text)
    record = {
        "ok": True,
        "findings": [],
        "table": {"rows read": 36, "tokens per conversation (median, p95, max)": [37, 37, 37], "epochs": None},
        "not_checked": None,
        "data_fingerprint": data_fingerprint(load(tmp_path / "for-fingerprint.yaml", "dev").pipeline),
        **fields,
    }
    path = tmp_path / "data.json"
    path.write_text(json.dumps(record))
    return path


def test_the_data_preflights_table_ends_the_plan(tmp_path):
    head, _ = _head_on_a_local_file(tmp_path)
    done = _plan(tmp_path, head, "--data", str(_data_record(tmp_path, head)))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("### tpu-sft: pipeline tasks this change re-runs")  # nothing stops the run
    assert done.stdout.rstrip().endswith(
        "Data preflight (a sample, read with the model's tokenizer):\n\n| | |\n|---|---|\n| rows read | 36 |\n"
        "| tokens per conversation (median, p95, max) | 37, 37, 37 |\n| epochs | — |"
    )


def test_a_finding_in_the_data_heads_the_plan(tmp_path):
    head, data = _head_on_a_local_file(tmp_path)
    finding = {"key": "tpu-sft:trainSplit", "problem": f"{data} has no split 'x|y'", "fix": "name another"}
    record = _data_record(tmp_path, head, ok=False, findings=[finding], table={"model access": "a|b"})
    done = _plan(tmp_path, head, "--data", str(record))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith(
        "**The data preflight found what stops the run** (scripts/preflight --data):\n\n"
        f"- `tpu-sft:trainSplit`: {data} has no split 'x|y'. Fix: name another\n\n"
        "### tpu-sft: pipeline tasks this change re-runs\n"
    )
    assert done.stdout.rstrip().endswith("| model access | a\\|b |")  # the data's `|` does not end the cell


def test_data_not_checked_is_one_line_saying_why(tmp_path):
    why = "gs://acme-chats/sft/*.jsonl is in Cloud Storage: reading it needs Google credentials"
    done = _plan(tmp_path, DEV, "--data", str(_data_record(tmp_path, DEV, table={}, not_checked=why)))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("### tpu-sft") and "|---|---|\n" not in done.stdout.split("Estimated cost")[1]
    assert done.stdout.rstrip().endswith(f"Data preflight: not checked (the check holds no credentials): {why}.")


def test_a_data_preflight_of_other_data_is_not_shown(tmp_path):
    head, data = _head_on_a_local_file(tmp_path)
    record = _data_record(tmp_path, head, ok=False, findings=[{"key": "k", "problem": "p", "fix": "f"}])
    write_jsonl(data, good_rows(39))  # the file changed since it was checked: another content hash, other inputs
    done = _plan(tmp_path, head, "--data", str(record))
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("### tpu-sft") and "- `k`: p" not in done.stdout
    assert done.stdout.rstrip().endswith(
        "Data preflight: the record given is of other data than this change's; not shown."
    )


@pytest.mark.parametrize("junk", ["[1, 2]", '{"findings": []}', "not json"])
def test_a_file_that_is_no_data_record_is_one_line_exit_2(tmp_path, junk):
    (tmp_path / "junk.json").write_text(junk)
    done = _plan(tmp_path, DEV, "--data", str(tmp_path / "junk.json"))
    assert done.returncode == 2
    assert done.stderr.startswith("error: --data: ") and done.stderr.count("\n") == 1


def test_moving_a_spot_vm_into_its_group_says_the_vm_is_replaced(tmp_path):
    """The move of an existing stack to tpu-sft:recovery auto: a new VM (its group's), every phase re-run on it, the
    data disk the same (tests/infra/resources/test_vm_group.py shows the declared disk unchanged)."""
    spot = DEV.replace("tpu-sft:provisioningModel: RESERVATION_BOUND", "tpu-sft:provisioningModel: SPOT").replace(
        "  tpu-sft:reservation: my-v6e-reservation", "  # no reservation"
    )
    plain = spot.replace('# tpu-sft:recovery: "off"', 'tpu-sft:recovery: "off"')
    (tmp_path / "base.yaml").write_text(plain)
    (tmp_path / "head.yaml").write_text(spot)
    rows = reruns.plan(load(tmp_path / "base.yaml", "dev"), load(tmp_path / "head.yaml", "dev"))
    assert all(rerun for _, rerun, _ in rows[:4])
    assert 'the VM is replaced: `tpu-sft:recovery`: "off" → "auto"' in rows[0][2]
