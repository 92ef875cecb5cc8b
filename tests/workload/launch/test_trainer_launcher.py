"""The trainer's launcher (workload/launch/trainer_launcher.py), on a module that does what grain does under train_sft:
start a child with multiprocessing's `spawn`. Real Python processes; no MaxText."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[3]
TRAINER = """
import json, multiprocessing, os, sys

with open(os.environ["IMPORTS_LOG"], "a") as log:  # every process that imports this module says so
    log.write(json.dumps({"pid": os.getpid(), "name": __name__}) + "\\n")


def main():
    child = multiprocessing.get_context("spawn").Process(target=os.getpid)
    child.start()
    child.join()
    print(json.dumps({"argv": sys.argv, "child_exit": child.exitcode}))


if __name__ == "__main__":
    main()
"""


def run(tmp_path: Path, *launch: str) -> tuple[dict, list[dict]]:
    (tmp_path / "fake_trainer.py").write_text(TRAINER)
    log = tmp_path / "imports.jsonl"
    log.unlink(missing_ok=True)
    done = subprocess.run(
        [sys.executable, "-m", *launch, "fake_trainer", "steps=2", "run_name=x"],
        env={"PYTHONPATH": f"{tmp_path}:{REPO}", "IMPORTS_LOG": str(log), "PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1]), [json.loads(line) for line in log.read_text().splitlines()]


def test_a_spawned_child_does_not_import_the_trainer_again(tmp_path):
    result, imports = run(tmp_path, "workload.launch.trainer_launcher")
    assert result["child_exit"] == 0
    assert [i["name"] for i in imports] == ["__main__"]  # the trainer's own process, and no other


def test_without_it_the_spawned_child_imports_the_trainer_again(tmp_path):
    """What the launcher is for: `python -m` alone makes every spawned child import the main module anew."""
    result, imports = run(tmp_path)
    assert result["child_exit"] == 0
    assert [i["name"] for i in imports] == ["__main__", "__mp_main__"]


def test_the_trainer_gets_argv_as_under_python_m(tmp_path):
    """MaxText's pyconfig picks the program's default config from the file in argv[0]."""
    launched, _ = run(tmp_path, "workload.launch.trainer_launcher")
    plain, _ = run(tmp_path)
    assert launched["argv"] == plain["argv"] == [str(tmp_path / "fake_trainer.py"), "steps=2", "run_name=x"]


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (
            ["no_such_trainer", "steps=2"],
            "no_such_trainer is not installed here. Fix: run this with the MaxText venv's Python",
        ),
        ([], "usage: python -m workload.launch.trainer_launcher MODULE [ARGS...]"),
    ],
)
def test_bad_input_is_one_line(argv, said):
    done = subprocess.run(
        [sys.executable, "-m", "workload.launch.trainer_launcher", *argv],
        env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 1
    assert done.stderr == said + "\n"
