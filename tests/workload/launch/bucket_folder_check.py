"""Run in the MaxText venv: MaxText's checkpoint-folder check on a folder in a bucket, as MaxText 0.2.3 ships it and
as the trainer's launcher patches it (workload/launch/bucket_folders.py). Prints one JSON line, each side's outcome."""

import json
import sys

from maxtext.utils import gcs_utils

from workload.launch import bucket_folders
from workload.run import storage


def outcome(folder: str) -> str:
    try:
        gcs_utils.mkdir_and_check_permissions(folder)
    except Exception as error:  # the outcome is the test's to judge
        return f"{type(error).__name__}: {error}"
    return "ok"


if __name__ == "__main__":
    folder = sys.argv[1]
    assert storage.client_env(folder) == {"EPATH_USE_TF": "false"}  # the caller set it, as the runner does
    shipped = outcome(folder)
    bucket_folders.patch()
    print(json.dumps({"shipped": shipped, "patched": outcome(folder)}))
