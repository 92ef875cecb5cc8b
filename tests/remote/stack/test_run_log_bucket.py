"""The run's log outlives the VM: the runner copies it beside its checkpoints as the VM's service account (through
the IAM-enforcing Cloud Storage stand-in), token redacted, and once the VM is lost `scripts/tpu-sft status` and
`logs` read its last lines from the bucket."""

import json
import os
import signal
import subprocess
import urllib.parse
import urllib.request

from remote.stack.gcs import Gcs
from remote.stack.run_log import bucket_log
from tests.remote.stack_commands import tpu_sft
from tests.ssh_testbed import free_port, wait_until
from tests.workload.tiny_run import REPO
from workload.launch.hf_token import REDACTED

WRITER = REPO / "tests" / "remote" / "stack" / "run_log_writer.py"
TOKEN = "hf_" + "Xyz789" * 6
RUN_DIR = "runs/gemma3-4b/post-train/run-a"


def read(gcs, name: str) -> str:
    quoted = urllib.parse.quote(name, safe="")
    with urllib.request.urlopen(f"{gcs.url}/storage/v1/b/{gcs.bucket}/o/{quoted}?alt=media", timeout=30) as response:
        return response.read().decode()


def test_a_lost_vms_last_lines_are_read_from_the_bucket(maxtext_python, gcs, recorded, tmp_path):
    writer = subprocess.Popen(
        [maxtext_python, str(WRITER), gcs.gs(RUN_DIR), TOKEN],
        env={**os.environ, "PYTHONPATH": str(REPO)},  # the gcs fixture's: the VM's identity
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        logs = wait_until(
            lambda: [n for n in gcs.objects(f"{RUN_DIR}/run-log/") if n.endswith(".jsonl") and "eval" in read(gcs, n)],
            what="the eval line copied to the bucket",
        )
    finally:
        writer.send_signal(signal.SIGKILL)  # the VM is lost: nothing more is copied
        _, err = writer.communicate(timeout=30)
    assert "log mirror" not in err  # no copy was refused
    copied = read(gcs, logs[0])
    assert TOKEN not in copied and f"token {REDACTED}" in copied
    assert [json.loads(line)["event"] for line in copied.splitlines()] == ["phase", "phase", "step", "eval"]
    assert json.loads(read(gcs, f"{RUN_DIR}/run-log/steps/convert.json"))["status"] == "done"

    found = bucket_log(Gcs(gcs.url, None), gcs.gs("runs"))  # the user's own view: the project's owner
    assert found is not None and found[1] == copied.splitlines()

    target = json.loads(recorded["target"]) | {"host": "127.0.0.1", "port": free_port("127.0.0.1")}
    target["profile"]["runs_dir"] = gcs.gs("runs")
    gone = {**recorded, "target": json.dumps(target)}
    env = {"STORAGE_EMULATOR_HOST": gcs.url}
    shown = tpu_sft(tmp_path, gone, "logs", env=env)
    assert shown.returncode == 0, shown.stderr
    assert "does not answer SSH" in shown.stderr and "the run's log as last copied to gs://" in shown.stderr
    assert shown.stdout.splitlines()[-2:] == [
        "train step 3/10 · loss 1.2345 · 1.00 s/step · ETA 1 min 10 s",
        "train held-out loss at step 3: 2.5000",
    ]
    status = tpu_sft(tmp_path, gone, "status", env=env).stdout.splitlines()
    assert status[-1].endswith(": train running · step 3/10 · loss 1.2345 · ETA 1 min 10 s")
