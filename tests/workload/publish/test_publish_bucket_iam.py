"""The publish step's grant on its destination bucket: `python -m workload.publish` runs on the VM as the VM's
service account (google-cloud-storage's default credentials), and the program declares no grant on that bucket:
the user gives one. Publishing a new model over an older one at the same path replaces objects, which Google
allows only with storage.objects.delete besides storage.objects.create: roles/storage.objectCreator with
objectViewer is not enough, roles/storage.objectUser is."""

import json

import pytest

from rehearsal import gcs_emulator
from rehearsal.storage_iam import StorageIam
from rehearsal.storage_roles import PREDEFINED_ROLES
from tests.workload.publish.cli import publish
from tests.workload.publish.test_publish import kept  # noqa: F401 (a fixture)
from workload.run.fingerprint import manifest

VM = "serviceAccount:tpu-sft-vm@my-project.iam.gserviceaccount.com"


@pytest.fixture
def destination(tmp_path):
    iam = StorageIam(gcs_emulator.start("models", tmp_path / "emulator.log"), {})
    yield iam
    iam.stop()


def a_new_model_under_the_same_name(model) -> None:
    (model / "verify.json").write_text('{"ok": false}')
    listed = [f for f in manifest(str(model), hashes=True) if f["path"] != "manifest.json"]
    files = [f for f in listed if not f["path"].startswith("eval/")]  # the eval step writes its report after keep
    (model / "manifest.json").write_text(json.dumps({"run_name": model.name, "files": files}, indent=1))


@pytest.mark.parametrize(
    "roles, replaced",
    [
        (("roles/storage.objectCreator", "roles/storage.objectViewer"), False),
        (("roles/storage.objectUser",), True),
    ],
)
def test_republishing_needs_delete_as_well_as_create(
    maxtext_python,
    destination,
    kept,  # noqa: F811
    roles,
    replaced,
):
    destination.grants = {VM: {"models": frozenset().union(*(PREDEFINED_ROLES[r] for r in roles))}}
    endpoint = destination.url(VM)
    code, summary = publish(maxtext_python, endpoint, kept, "--gcs", "gs://models/m")
    assert code == 0, summary  # a first publish only creates
    a_new_model_under_the_same_name(kept)
    code, summary = publish(maxtext_python, endpoint, kept, "--gcs", "gs://models/m")
    if replaced:
        # The run's files go under tpu-sft/; the model card says whether verify passed, so it changes too.
        assert code == 0 and summary["published"]["gs://models/m"]["uploaded"] == ["tpu-sft/verify.json", "README.md"]
    else:
        assert code != 0
        assert "does not have storage.objects.delete access to the Google Cloud Storage object" in summary["error"]
