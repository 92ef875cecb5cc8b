"""The checkpoint bucket, field by field, the VM's one grant on it, and what `pulumi destroy` does to it."""

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
    assert bucket.inputs["labels"] == {"app": "tpu-sft", "stack": "dev", "owner": "ml-platform",
                                       "cost-center": "research", "tpu-sft-role": "checkpoints"}
    assert bucket.inputs["lifecycleRules"] == [
        {"action": {"type": "Delete"}, "condition": {"age": 30, "matchesPrefixes": ["runs/"]}}
    ]
    assert bucket.inputs["forceDestroy"] is False  # a bucket holding checkpoints is not deleted unless asked
    assert bucket.retain_on_delete is False and bucket.protect is False


def test_retention_name_and_force_destroy_are_settings(mock_stack):
    bucket = mock_stack({"tpu-sft:checkpointBucket": "team-ckpts", "tpu-sft:checkpointRetentionDays": "7",
                         "tpu-sft:bucketForceDestroy": "true"}).one(BUCKET)
    assert bucket.inputs["name"] == "team-ckpts"
    assert bucket.inputs["lifecycleRules"][0]["condition"]["age"] == 7
    assert bucket.inputs["forceDestroy"] is True


def test_the_vm_default_service_account_gets_object_user_on_this_bucket_only(mock_stack):
    stack = mock_stack()
    (member,) = stack.of_type(MEMBER)
    assert member.inputs == {
        "bucket": "my-tpu-project-tpu-sft-dev-runs",
        "role": "roles/storage.objectUser",  # create, read, list, delete objects; no bucket or IAM admin
        # Unset tpu-sft:serviceAccount: the account Google attached to the VM, read back from the instance.
        "member": "serviceAccount:123456789012-compute@developer.gserviceaccount.com",
    }
    assert stack.one(INSTANCE).urn in member.dependencies


def test_a_named_service_account_is_the_vm_identity_and_the_grantee(mock_stack):
    email = "tpu-sft-vm@my-tpu-project.iam.gserviceaccount.com"
    stack = mock_stack({"tpu-sft:serviceAccount": email})
    assert stack.one(INSTANCE).inputs["serviceAccount"] == {
        "email": email, "scopes": ["https://www.googleapis.com/auth/cloud-platform"]}
    assert stack.one(MEMBER).inputs["member"] == f"serviceAccount:{email}"


def test_the_phases_are_told_where_checkpoints_go(mock_stack):
    assert mock_stack().outputs["checkpointsUrl"] == "gs://my-tpu-project-tpu-sft-dev-runs/runs"


def test_every_update_refreshes_first_so_a_vanished_vm_is_recreated():
    project = yaml.safe_load((ROOT / "Pulumi.yaml").read_text())
    assert project["options"] == {"refresh": "always"}
