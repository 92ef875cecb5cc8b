"""`python -m infra.plan`: which phases a config change re-runs, printed for a pull request."""

import subprocess
import sys
from pathlib import Path

import pytest

from rehearsal.engine import ROOT

DEV = (ROOT / "Pulumi.dev.yaml").read_text()


def _plan(tmp_path: Path, head_text: str) -> subprocess.CompletedProcess:
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


def test_steps_rerun_train_and_export_only(tmp_path):
    done = _plan(tmp_path, _changed(**{'tpu-sft:steps: "1000"': 'tpu-sft:steps: "2000"'}))
    assert done.returncode == 0, done.stderr
    assert _rerun(done.stdout) == {"train", "export"}
    assert "| train | **yes** | `steps`: 1000 → 2000 |" in done.stdout
    assert "| bootstrap | no |  |" in done.stdout and "| convert | no |  |" in done.stdout


def test_maxtext_version_reruns_every_phase(tmp_path):
    done = _plan(tmp_path, _changed(**{"tpu-sft:maxtextVersion: 0.2.2": "tpu-sft:maxtextVersion: 0.2.5"}))
    assert _rerun(done.stdout) == {"bootstrap", "convert", "train", "export"}
    assert '`maxtextVersion`: "0.2.2" → "0.2.5"' in done.stdout


def test_replaced_vm_reruns_every_phase(tmp_path):
    done = _plan(tmp_path, _changed(**{"gcp:zone: us-east5-b": "gcp:zone: us-east5-a"}))
    assert _rerun(done.stdout) == {"bootstrap", "convert", "train", "export"}
    assert "the VM is replaced" in done.stdout


def test_label_change_reruns_nothing(tmp_path):
    done = _plan(tmp_path, _changed(**{"owner: ml-platform": "owner: someone-else"}))
    assert done.returncode == 0
    assert _rerun(done.stdout) == set()


def test_cost_is_shown(tmp_path):
    done = _plan(tmp_path, _changed(**{'tpu-sft:steps: "1000"': 'tpu-sft:steps: "5000"'}))
    assert "Estimated cost of a full run: $" in done.stdout


@pytest.mark.parametrize(
    ("head", "expected"),
    [("tpu-sft:steps: '0'\n", "tpu-sft:steps"), ("config: [\n", "is not valid YAML at line 2")],
)
def test_bad_config_is_one_line_exit_2(tmp_path, head, expected):
    text = DEV.replace('  tpu-sft:steps: "1000"\n', "") + "  " + head if "steps" in head else head
    done = _plan(tmp_path, text)
    assert done.returncode == 2
    assert expected in done.stderr and done.stderr.count("\n") == 1
