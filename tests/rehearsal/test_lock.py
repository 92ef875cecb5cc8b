"""One rehearsal per directory: a second one started in the same directory stops at once with one line,
before it starts an sshd; the lock goes with the process that held it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from rehearsal.dir_lock import DirectoryUnusable, exclusive

pytestmark = pytest.mark.maxtext  # the rehearsal refuses to start without .maxtext-venv, before taking the lock

REPO = Path(__file__).resolve().parents[2]
HOLD = (
    "import sys, time; from pathlib import Path; from rehearsal.dir_lock import exclusive\n"
    "with exclusive(Path(sys.argv[1])):\n    print('held', flush=True); time.sleep(120)"
)


def test_a_second_rehearsal_in_the_same_directory_stops_with_one_line(tmp_path):
    directory = tmp_path / "rehearsal"
    with exclusive(directory):
        done = subprocess.run(
            [sys.executable, "-m", "rehearsal", "--dir", str(directory)],
            capture_output=True,
            text=True,
            cwd=REPO,
            timeout=120,
            stdin=subprocess.DEVNULL,
        )
    assert done.returncode == 3
    assert done.stderr.strip().splitlines() == [
        f"error: another rehearsal (pid {os.getpid()}) is running in {directory}; wait for it to end, "
        "or give this one another --dir"
    ]
    assert not (directory / "vm").exists()  # no sshd, no keys


def test_the_lock_is_released_when_its_holder_dies(tmp_path):
    directory = tmp_path / "rehearsal"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(directory)], stdout=subprocess.PIPE, text=True, cwd=REPO)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(DirectoryUnusable, match=f"pid {holder.pid}"), exclusive(directory):
            pass
    finally:
        holder.kill()
        holder.wait()
    with exclusive(directory):  # SIGKILL left no stale lock
        pass


def test_a_directory_that_cannot_be_made_is_one_line(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(DirectoryUnusable, match="cannot use .*file/sub"), exclusive(tmp_path / "file" / "sub"):
        pass
