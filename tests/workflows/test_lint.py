"""The workflows pass actionlint (with shellcheck on every `run:`) and zizmor's security audits, offline."""

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = ROOT / ".github" / "workflows"
BIN = Path(sys.executable).parent  # actionlint, shellcheck and zizmor come from requirements.txt into the venv

# A workflow with the mistakes the linters exist for: a pull request's title pasted into a shell, an unquoted
# variable, an unpinned action.
BROKEN = """\
on: pull_request
jobs:
  x:
    runs-on: ubuntu-24.04
    steps:
      - uses: actions/checkout@v4
      - run: echo ${{ github.event.pull_request.title }} $HOME/$1
"""


def actionlint(*paths: Path) -> subprocess.CompletedProcess:
    command: list[str | Path] = [BIN / "actionlint", "-no-color", "-shellcheck", BIN / "shellcheck", *paths]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)


def zizmor(*paths: Path) -> subprocess.CompletedProcess:
    command: list[str | Path] = [BIN / "zizmor", "--offline", "--no-progress", "--color=never", *paths]
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, timeout=120)


@pytest.fixture
def broken(tmp_path: Path) -> Path:
    path = tmp_path / ".github" / "workflows" / "broken.yml"
    path.parent.mkdir(parents=True)
    path.write_text(BROKEN)
    return path


def test_there_are_workflows():
    assert sorted(p.name for p in WORKFLOWS.glob("*.yml")) == ["preview.yml"]


def test_actionlint_passes():
    result = actionlint(*sorted(WORKFLOWS.glob("*.yml")))
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_catches_a_broken_workflow(broken):
    result = actionlint(broken)
    assert result.returncode == 1, result.stdout + result.stderr
    assert '"github.event.pull_request.title" is potentially untrusted' in result.stdout
    assert "SC2086" in result.stdout  # shellcheck ran on the `run:` script


def test_zizmor_passes():
    result = zizmor(WORKFLOWS)
    assert result.returncode == 0, result.stdout + result.stderr


def test_zizmor_catches_a_broken_workflow(broken):
    result = zizmor(broken.parent)
    assert result.returncode != 0
    assert "template-injection" in result.stdout and "unpinned-uses" in result.stdout, result.stdout
