"""What tpu-sft's machinery costs on top of the work itself: the rehearsal's wall time against the same
MaxText commands typed by hand over plain `ssh` to the same local sshd, as a ratio from one run.

    .venv/bin/python -m bench.rehearsal_overhead

By hand: `python -m workload commands` prints the copy-pasteable commands for the rehearsal's settings; each
(the tiny assets, to_maxtext, train_sft, to_huggingface) runs in one `ssh` call, in a fresh work directory.
Rehearsal: `python -m rehearsal` in a fresh directory — the same commands, plus what a person would also do
by hand afterwards (verify the export, keep it with checksums, plot the loss), shown separately so the ratio
can be read with and without that extra work. Target: ≤ 1.05. Each side runs the tiny pipeline (minutes).
"""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from infra.config.stack_file import read_stack_config
from rehearsal.__main__ import CONFIG
from rehearsal.local_host import MAXTEXT_VENV, LocalHost
from workload.core.config import BY_KEY, PipelineConfig

ROOT = Path(__file__).resolve().parent.parent


def _pipeline_json() -> str:
    raw = {k.split(":", 1)[1]: v for k, v in read_stack_config(CONFIG).items() if k.startswith("tpu-sft:")}
    return json.dumps(PipelineConfig.from_mapping({k: v for k, v in raw.items() if k in BY_KEY}).to_mapping())


def by_hand(directory: Path) -> float:
    """The printed commands, one `ssh` each, as a person would paste them."""
    host = LocalHost.start(directory / "vm")
    try:
        work, config = directory / "scratch", directory / "settings.json"
        config.write_text(_pipeline_json())
        printed = subprocess.run(
            [
                sys.executable,
                "-m",
                "workload",
                "commands",
                "--config",
                str(config),
                "--work-dir",
                str(work),
                "--output-dir",
                str(directory / "disk"),
                "--python",
                str(MAXTEXT_VENV / "bin" / "python"),
            ],
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        scripts = [f"{MAXTEXT_VENV}/bin/python -m workload.tiny.assets {shlex.quote(str(work / 'tiny'))}"]
        scripts += [block.split("\n", 1)[1] for block in printed.strip().split("\n\n")]
        ssh = [
            "ssh",
            "-i",
            str(host.sshd.user_key.private),
            "-p",
            str(host.sshd.port),
            "-o",
            "BatchMode=yes",
            "-o",
            f"UserKnownHostsFile={host.directory / 'known_hosts'}",
            f"{host.user}@{host.sshd.address}",
        ]
        started = time.monotonic()
        for script in scripts:
            subprocess.run([*ssh, f"cd {shlex.quote(str(ROOT))} && {script}"], check=True, capture_output=True)
        return time.monotonic() - started
    finally:
        host.stop()


def rehearsal(directory: Path) -> tuple[float, float]:
    """Wall time, and the seconds of the steps a person would not have typed (verify, keep)."""
    started = time.monotonic()
    subprocess.run(
        [sys.executable, "-m", "rehearsal", "--dir", str(directory)], cwd=ROOT, check=True, capture_output=True
    )
    wall = time.monotonic() - started
    log = next((directory / "vm" / "host" / "jobs").glob("export-*/log")).read_text()
    extra = sum(
        e.get("seconds", 0)
        for e in map(json.loads, log.splitlines())
        if e.get("event") == "phase" and e.get("status") == "done" and e.get("phase") in ("verify", "keep")
    )
    return wall, extra


def main() -> int:
    with tempfile.TemporaryDirectory(prefix="tpu-sft-bench-") as tmp:
        manual = by_hand(Path(tmp, "by-hand"))
        wall, extra = rehearsal(Path(tmp, "rehearsal"))
    print(f"by hand over ssh (assets + 3 MaxText commands)  {manual:7.1f} s")
    print(f"rehearsal (all phases, through pulumi's commands) {wall:7.1f} s  (of which verify + keep {extra:.1f} s)")
    print(f"ratio                                             {wall / manual:7.3f}   (target ≤ 1.05)")
    print(f"ratio without verify + keep                       {(wall - extra) / manual:7.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
