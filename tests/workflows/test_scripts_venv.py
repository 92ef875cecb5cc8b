"""scripts/venv refuses, in one line, a python3 older than the 3.11 requirements.txt's pins need, before it makes
anything."""

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_an_older_python3_is_refused_in_one_line(tmp_path):
    (tmp_path / "scripts").mkdir()
    shutil.copy(ROOT / "scripts" / "venv", tmp_path / "scripts" / "venv")  # it works in the folder above its own
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    python3 = bin_dir / "python3"  # answers as a Python 3.10 does: its version check fails, -V names it
    python3.write_text('#!/bin/sh\n[ "$1" = -V ] && echo "Python 3.10.12" && exit 0\nexit 1\n')
    python3.chmod(0o755)
    done = subprocess.run(
        [str(tmp_path / "scripts" / "venv")],
        env={"PATH": f"{bin_dir}:/usr/bin:/bin"},
        capture_output=True,
        text=True,
    )
    assert done.returncode == 1
    assert done.stderr == (
        "scripts/venv: python3 is 3.10.12, and .venv needs Python 3.11 or newer: install one and put it first on PATH "
        "as python3\n"
    )
    assert not (tmp_path / ".venv").exists()
