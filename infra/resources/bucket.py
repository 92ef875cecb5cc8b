"""A Cloud Storage bucket that outlives the VM, and the one service account allowed to use it.

General on purpose (the training checkpoints use one; publishing may use another): uniform bucket-level access
with public access prevented, the stack's labels, a lifecycle rule that deletes objects under given prefixes after
some days, `force_destroy` always (keeping a bucket is `keep_on_destroy`'s job), and two roles on this bucket
alone for each member: `roles/storage.objectUser`, the smallest predefined role that lets orbax and tensorstore
create, read, list and delete objects, and `roles/storage.legacyBucketReader`, whose only permission objectUser lacks is
`storage.buckets.get`. orbax-checkpoint 0.11.39 needs it on every resume: a CheckpointManager opened on an
existing directory looks the bucket up (`gcs_utils.is_hierarchical_namespace_enabled`, uncaught). No custom
role: a deleted custom role's ID cannot be reused for up to 37 days. `checkpoints` is the stack's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pulumi
import pulumi_gcp as gcp

from infra.config.settings import Settings
from workload.core.contract import RUNS_PREFIX

OBJECT_USER = "roles/storage.objectUser"
BUCKET_READER = "roles/storage.legacyBucketReader"  # storage.buckets.get (+ objects.list, multipartUploads.list)


@dataclass(frozen=True)
class BucketArgs:
    name: str
    location: str  # the VM's region: no cross-region transfer, no dual-region price
    labels: dict[str, str]
    expire_prefixes: Sequence[str]  # objects under these prefixes are deleted `expire_after_days` after creation
    expire_after_days: int
    keep_on_destroy: bool  # `pulumi destroy` forgets the bucket instead of deleting it
    object_users: Sequence[pulumi.Input[str]]  # IAM members ("serviceAccount:…") that read and write objects and
    # read the bucket's metadata


class Bucket(pulumi.ComponentResource):
    def __init__(self, name: str, args: BucketArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-sft:infra:Bucket", name, None, opts)
        self.bucket = gcp.storage.Bucket(
            name,
            name=args.name,
            location=args.location,
            storage_class="STANDARD",
            uniform_bucket_level_access=True,
            public_access_prevention="enforced",
            labels=dict(args.labels),
            # A bucket is either kept (retain_on_delete: Pulumi forgets it) or deleted with what it holds. Without
            # force_destroy, Cloud Storage refuses to delete a bucket holding objects, and `pulumi destroy` would stop
            # half-way with the checkpoints still billing; no flag can be changed then without a `pulumi up`, which
            # would first make a new TPU VM where autostop deleted the last one.
            force_destroy=True,
            lifecycle_rules=[
                gcp.storage.BucketLifecycleRuleArgs(
                    action=gcp.storage.BucketLifecycleRuleActionArgs(type="Delete"),
                    condition=gcp.storage.BucketLifecycleRuleConditionArgs(
                        age=args.expire_after_days, matches_prefixes=list(args.expire_prefixes)
                    ),
                )
            ],
            opts=pulumi.ResourceOptions(parent=self, retain_on_delete=args.keep_on_destroy),
        )
        self.members = [
            gcp.storage.BucketIAMMember(
                f"{name}-{suffix}-{index}",
                bucket=self.bucket.name,
                role=role,
                member=member,
                opts=pulumi.ResourceOptions(parent=self),
            )
            for index, member in enumerate(args.object_users)
            for suffix, role in (("object-user", OBJECT_USER), ("bucket-reader", BUCKET_READER))
        ]
        self.name = self.bucket.name
        self.url = self.bucket.name.apply(lambda bucket: f"gs://{bucket}")
        self.register_outputs({"name": self.name, "url": self.url})


def region_of(zone: str) -> str:
    """us-east5-b → us-east5: the bucket lives where the VM runs."""
    return zone.rsplit("-", 1)[0].upper()


def checkpoints(s: Settings, service_account_email: pulumi.Input[str]) -> Bucket:
    """The stack's checkpoint bucket, in the hosts' region, for their service account: training checkpoints under
    `runs/`, expired after the retention days, and a slice's kept model."""
    return Bucket(
        f"{s.instance_name}-runs",
        BucketArgs(
            name=s.checkpoint_bucket,
            location=region_of(s.zone),
            labels={**dict(s.labels), "tpu-sft-role": "checkpoints"},
            expire_prefixes=[f"{RUNS_PREFIX}/"],
            expire_after_days=s.checkpoint_retention_days,
            keep_on_destroy=s.keeps_bucket,
            object_users=[pulumi.Output.concat("serviceAccount:", service_account_email)],
        ),
    )
