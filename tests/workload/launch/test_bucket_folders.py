"""MaxText's own loop can checkpoint into a bucket (workload/launch/bucket_folders.py): MaxText 0.2.3 refuses a
checkpoint folder in Cloud Storage because no folder object appears there, though the bucket is writable; the patched
check writes there instead. Real MaxText, real gcsfs and the Cloud Storage emulator with the VM's IAM."""

import json
import os
import subprocess

from tests.workload.tiny_run import REPO


def test_a_checkpoint_folder_in_a_writable_bucket_is_accepted_once_patched(maxtext_python, gcs):
    folder = gcs.gs("runs", "gemma3-4b", "post-train", "a-run", "checkpoints")
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu", "EPATH_USE_TF": "false"}
    script = REPO / "tests" / "workload" / "launch" / "bucket_folder_check.py"
    done = subprocess.run([maxtext_python, str(script), folder], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["shipped"].startswith("PermissionError: Failed to create the directory")
    assert found["patched"] == "ok"
    assert not [name for name in gcs.objects("runs/") if ".write_test_" in name]  # the probe is deleted
