"""MaxText's check that its checkpoint folder was made, fitted to Cloud Storage, which has no folders.

MaxText 0.2.3's own loop makes its checkpoint folders with `gcs_utils.mkdir_and_check_permissions`
(common/checkpointing.py 408 and 481): `epath.Path.mkdir`, then `exists()`, or PermissionError. In a bucket there is
no folder to make: through gcsfs, which etils.epath uses here as on the VM (EPATH_USE_TF=false,
workload/run/storage.py `client_env`), a mkdir inside a bucket writes nothing and a prefix with no object does not
exist, so the check refused every run whose checkpoints go to a bucket, writable as it was (the fresh-VM and slice
rehearsals, 2026-12-05). For a gs:// folder this keeps the function's bucket check and its write test, an object
written and deleted, which is what shows the run may write there, and drops `exists()`; any other path goes to
MaxText's own function. Tunix's loop makes its folders through orbax and never calls it.

Runs in the MaxText venv: the trainer's launcher applies it to MaxText's own loop (workload/launch/trainer_launcher.py).
"""

from __future__ import annotations

import uuid
from typing import Any, Callable

from workload.launch import pinned_code

PATCH = "workload/launch/bucket_folders.py"
# sha256 of maxtext 0.2.3's gcs_utils.mkdir_and_check_permissions, 0.2.2's unchanged (workload/launch/pinned_code.py).
MAXTEXT_MKDIR_SHA256 = "b5da3ad1665bc949b96be560888c1adac1e2766c3f2c7361af041e69f6905d4b"


def patch() -> None:
    from maxtext.utils import gcs_utils

    pinned_code.check(gcs_utils, "mkdir_and_check_permissions", "maxtext", MAXTEXT_MKDIR_SHA256, PATCH)
    gcs_utils.mkdir_and_check_permissions = _in_a_bucket_by_writing(gcs_utils.mkdir_and_check_permissions)


def _in_a_bucket_by_writing(mkdir_and_check_permissions: Callable) -> Callable:
    def checked(path: Any) -> Any:
        from etils import epath
        from maxtext.utils import gcs_utils

        path = epath.Path(path)
        if not path.as_posix().startswith("gs://"):
            return mkdir_and_check_permissions(path)
        if len(path.parts) < 3:
            raise ValueError(f"Invalid GCS path (missing bucket name): '{path}'")
        bucket = path.parts[2]
        try:
            gcs_utils.storage.Client().get_bucket(bucket)
        except Exception as error:
            raise FileNotFoundError(f"GCS bucket 'gs://{bucket}' not found or accessible.") from error
        probe = path / f".write_test_{uuid.uuid4()}"
        try:
            probe.write_text("test")
        except Exception as error:
            raise PermissionError(f"'{path}' is not writable: {error}") from error
        probe.unlink()
        return path

    return checked
