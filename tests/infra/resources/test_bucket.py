"""The checkpoint bucket, field by field, the VM's grants on it, and what `pulumi destroy` does to it."""

import yaml

from rehearsal.engine import ROOT

BUCKET = "gcp:storage/bucket:Bucket"
MEMBER = "gcp:storage/bucketIAMMember:BucketIAMMember"
INSTANCE = "gcp:compute/instance:Instance"


def test_bucket_fields(mock_stack):
    bucket = mock_stack().one(BUCKET)
    assert bucket.inputs["name"] == "my-tpu-project-tpu-sft-dev-runs"  # derived from the (globally unique) project
    assert bucket.inputs["location"] == "US-EAST5"  # the VM's region: no cross-region transfer
    assert bucket.inputs["storageClass"] == "STANDARD"
    assert bucket.inputs["uniformBucketLevelAccess"] is True  # IAM only, no per-object ACLs
    assert bucket.inputs["publicAccessPrevention"] == "enforced"
    assert bucket.inputs["labels"] == {
        "app": "tpu-sft",
        "stack": "dev",
        "owner": "ml-platform",
        "cost-center": "research",
        "tpu-sft-role": "checkpoints",
    }
    assert bucket.inputs["lifecycleRules"] == [
        {"action": {"type": "Delete"}, "condition": {"age": 30, "matchesPrefixes": ["runs/"]}}
    ]
    # `pulumi destroy` empties and deletes it (tests/infra/plan/test_keep_on_destroy.py: and what keeps it)
    assert bucket.inputs["forceDestroy"] is True
    assert bucket.retain_on_delete is False and bucket.protect is False


def test_retention_and_name_are_settings(mock_stack):
    bucket = mock_stack({"tpu-sft:checkpointBucket": "team-ckpts", "tpu-sft:checkpointRetentionDays": "7"}).one(BUCKET)
    assert bucket.inputs["name"] == "team-ckpts"
    assert bucket.inputs["lifecycleRules"][0]["condition"]["age"] == 7


def test_the_vm_default_service_account_gets_object_user_and_legacy_bucket_reader_on_this_bucket_only(mock_stack):
    stack = mock_stack()
    members = stack.of_type(MEMBER)
    # Unset tpu-sft:serviceAccount: the account Google attached to the VM, read back from the instance.
    vm = "serviceAccount:123456789012-compute@developer.gserviceaccount.com"
    assert sorted((m.inputs["role"], m.inputs["member"], m.inputs["bucket"]) for m in members) == [
        # storage.buckets.get and nothing else that objectUser lacks: orbax looks the bucket up on every resume
        ("roles/storage.legacyBucketReader", vm, "my-tpu-project-tpu-sft-dev-runs"),
        ("roles/storage.objectUser", vm, "my-tpu-project-tpu-sft-dev-runs"),  # create, read, list, delete objects
    ]
    assert all(m.inputs.keys() == {"bucket", "role", "member"} for m in members)  # no condition, no other field
    assert all(stack.one(INSTANCE).urn in m.dependencies for m in members)


def test_a_named_service_account_is_the_vm_identity_and_the_grantee(mock_stack):
    email = "tpu-sft-vm@my-tpu-project.iam.gserviceaccount.com"
    stack = mock_stack({"tpu-sft:serviceAccount": email})
    assert stack.one(INSTANCE).inputs["serviceAccount"] == {
        "email": email,
        "scopes": ["https://www.googleapis.com/auth/cloud-platform"],
    }
    assert {m.inputs["member"] for m in stack.of_type(MEMBER)} == {f"serviceAccount:{email}"}


def test_the_phases_are_told_where_checkpoints_go(mock_stack):
    assert mock_stack().outputs["checkpointsUrl"] == "gs://my-tpu-project-tpu-sft-dev-runs/runs"


def test_every_update_refreshes_first_so_a_vanished_vm_is_recreated():
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    assert project["options"] == {"refresh": "always"}
