"""The Cloud Storage IAM stand-in (rehearsal/storage_iam.py): the grants it reads from what the program declared,
and how it answers a caller whose roles do not cover a request — as Google does, 403 naming the permission."""

import json
import urllib.error
import urllib.request

import pytest

from rehearsal import gcs_emulator
from rehearsal.engine import Declared, Stack
from rehearsal.storage_iam import DeclaredStorage, NotModelled, StorageIam, grants_of
from rehearsal.storage_roles import PREDEFINED_ROLES

VM = "serviceAccount:123456789012-compute@developer.gserviceaccount.com"
BUCKET = "ckpts"


def call(
    url: str, method: str = "GET", data: bytes | None = None, headers: dict[str, str] | None = None
) -> tuple[int, dict, dict]:
    """Status, headers, and the body when it is JSON."""
    request = urllib.request.Request(url, data=data, method=method, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, answered, body = response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        status, answered, body = error.code, dict(error.headers), error.read()
    is_json = answered.get("Content-Type", "").startswith("application/json") and body.strip()
    return status, answered, json.loads(body) if is_json else {}


@pytest.fixture
def storage(tmp_path):
    """A stand-in whose grants each test sets (`storage.grants = …`), the VM's endpoint already open."""
    iam = StorageIam(gcs_emulator.start(BUCKET, tmp_path / "emulator.log"), {})
    yield iam
    iam.stop()


def roles(*names: str) -> dict:
    return {VM: {BUCKET: frozenset().union(*(PREDEFINED_ROLES[n] for n in names))}}


def upload(iam: StorageIam, name: str, data: bytes, member: str = VM) -> tuple[int, dict, dict]:
    return call(
        f"{iam.url(member)}/upload/storage/v1/b/{BUCKET}/o?uploadType=media&name={name}",
        "POST",
        data,
        {"Content-Type": "application/octet-stream"},
    )


def test_the_program_grants_the_vm_object_user_and_legacy_bucket_reader_on_its_bucket(mock_stack):
    declared = DeclaredStorage.of(mock_stack())
    assert declared.host == VM
    assert declared.grants == {
        VM: {
            declared.bucket: PREDEFINED_ROLES["roles/storage.objectUser"]
            | PREDEFINED_ROLES["roles/storage.legacyBucketReader"]
        }
    }
    # What objectUser lacks and the resume needs (orbax's bucket lookup), and nothing of bucket or IAM admin.
    assert "storage.buckets.get" in declared.grants[VM][declared.bucket]
    assert (
        not {"storage.buckets.update", "storage.buckets.setIamPolicy", "storage.buckets.delete"}
        & declared.grants[VM][declared.bucket]
    )


def test_a_missing_permission_is_a_403_in_googles_shape_naming_the_account_and_permission(storage):
    storage.grants = roles("roles/storage.objectUser")
    status, headers, body = call(f"{storage.url(VM)}/storage/v1/b/{BUCKET}?projection=noAcl")
    message = (
        "123456789012-compute@developer.gserviceaccount.com does not have storage.buckets.get access to the "
        "Google Cloud Storage bucket. Permission 'storage.buckets.get' denied on resource (or it may not "
        "exist)."
    )
    assert status == 403 and headers["Content-Type"].startswith("application/json")
    assert body == {
        "error": {
            "code": 403,
            "message": message,
            "errors": [{"message": message, "domain": "global", "reason": "forbidden"}],
        }
    }
    storage.grants = roles("roles/storage.objectUser", "roles/storage.legacyBucketReader")
    assert call(f"{storage.url(VM)}/storage/v1/b/{BUCKET}?projection=noAcl")[0] == 200


def test_identity_is_the_endpoint_another_account_has_nothing(storage):
    storage.grants = roles("roles/storage.objectUser")
    assert upload(storage, "a", b"1")[0] == 200
    other = "serviceAccount:someone@else.iam.gserviceaccount.com"
    status, _, body = call(f"{storage.url(other)}/storage/v1/b/{BUCKET}/o/a")
    assert status == 403 and body["error"]["message"].startswith(
        "someone@else.iam.gserviceaccount.com does not have storage.objects.get access to the Google Cloud Storage "
        "object."
    )


def test_replacing_an_object_needs_delete_as_well_as_create(storage):
    """Google: replacing an existing object needs storage.objects.create and storage.objects.delete."""
    storage.grants = roles("roles/storage.objectCreator", "roles/storage.objectViewer")
    assert upload(storage, "m/manifest.json", b"first")[0] == 200
    status, _, body = upload(storage, "m/manifest.json", b"second")
    assert status == 403 and "does not have storage.objects.delete access" in body["error"]["message"]
    assert call(f"{storage.url(VM)}/download/storage/v1/b/{BUCKET}/o/m%2Fmanifest.json?alt=media")[0] == 200
    storage.grants = roles("roles/storage.objectUser")
    assert upload(storage, "m/manifest.json", b"second")[0] == 200


def test_each_part_of_a_batch_is_checked(storage):
    storage.grants = roles("roles/storage.objectUser")
    upload(storage, "a", b"1")
    storage.grants = roles("roles/storage.objectViewer")
    batch = b"--b\r\nContent-Type: application/http\r\n\r\nDELETE /storage/v1/b/ckpts/o/a HTTP/1.1\r\n\r\n\r\n--b--\r\n"
    status, _, body = call(
        f"{storage.url(VM)}/batch/storage/v1", "POST", batch, {"Content-Type": "multipart/mixed; boundary=b"}
    )
    assert status == 403 and "does not have storage.objects.delete access" in body["error"]["message"]
    assert storage.emulator.objects() == {"a": 1}


def test_a_request_the_map_does_not_cover_is_refused_not_passed(storage):
    storage.grants = roles("roles/storage.objectUser", "roles/storage.legacyBucketReader")
    status, _, body = call(f"{storage.url(VM)}/storage/v1/b?project=p")  # list buckets: a project-level call
    assert status == 403 and "cannot tell which permission GET /storage/v1/b needs" in body["error"]["message"]
    assert storage.refusals and storage.refusals[-1].startswith("GET /storage/v1/b?project=p")


def test_a_resumable_upload_goes_through_the_callers_endpoint(storage):
    storage.grants = roles("roles/storage.objectUser")
    endpoint = storage.url(VM)
    request = urllib.request.Request(
        f"{endpoint}/upload/storage/v1/b/{BUCKET}/o?uploadType=resumable",
        method="POST",
        data=json.dumps({"name": "big"}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as response:
        session = response.headers["Location"]
    assert session.startswith(endpoint)  # the emulator built it from the caller's Host: it comes back through here
    assert call(session, "PUT", b"0123456789", {"Content-Type": "application/octet-stream"})[0] == 200
    assert storage.emulator.objects() == {"big": 10}


def declared(type_: str, **inputs) -> Declared:
    return Declared(type_, "r", inputs, "", [], False, False, False, [], [])


def test_what_the_stand_in_cannot_evaluate_it_refuses_to_guess():
    conditional = declared(
        "gcp:storage/bucketIAMMember:BucketIAMMember",
        bucket=BUCKET,
        member=VM,
        role="roles/storage.objectUser",
        condition={"expression": "true", "title": "t"},
    )
    with pytest.raises(NotModelled, match="IAM condition"):
        grants_of(Stack([conditional]))
    # Under a condition, a role with no storage permission gates nothing here.
    group_role = declared(
        "gcp:projects/iAMCustomRole:IAMCustomRole",
        project="p",
        roleId="autostop",
        permissions=["compute.instanceGroupManagers.update"],
    )
    group_grant = declared(
        "gcp:projects/iAMMember:IAMMember",
        project="p",
        member=VM,
        role="projects/p/roles/autostop",
        condition={"expression": 'resource.name == "projects/p/zones/z/instanceGroupManagers/g"', "title": "t"},
    )
    assert grants_of(Stack([group_role, group_grant])) == {}
    legacy_on_project = declared(
        "gcp:projects/iAMMember:IAMMember", project="p", member=VM, role="roles/storage.legacyBucketReader"
    )
    with pytest.raises(NotModelled, match="legacy roles on buckets only"):
        grants_of(Stack([legacy_on_project]))
    unknown = declared(
        "gcp:storage/bucketIAMMember:BucketIAMMember", bucket=BUCKET, member=VM, role="roles/storage.admin"
    )
    with pytest.raises(NotModelled, match="not in rehearsal/storage_roles.py"):
        grants_of(Stack([unknown]))


def test_a_custom_role_grants_its_declared_storage_permissions():
    role = declared(
        "gcp:projects/iAMCustomRole:IAMCustomRole",
        project="p",
        roleId="ckptReader",
        permissions=["storage.buckets.get", "compute.instances.stop"],
    )
    binding = declared(
        "gcp:storage/bucketIAMMember:BucketIAMMember", bucket=BUCKET, member=VM, role="projects/p/roles/ckptReader"
    )
    assert grants_of(Stack([role, binding])) == {VM: {BUCKET: frozenset({"storage.buckets.get"})}}
