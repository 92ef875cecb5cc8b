"""What the VM needs to read its dataset: the local files' copies in the stack's bucket, and a read-only grant on any
other bucket the dataset (or its held-out files) is in.

The copies are `BucketObject`s named by content hash (infra/config/local_data.py): the same file declares the same
object, which Pulumi does not send again; a changed file is a new object (the old one is deleted with its name). A
dataset in another bucket is read on the VM with the VM's own identity, so that identity gets
`roles/storage.objectViewer` (objects get and list, nothing else: MaxText's `datasets` lists a pattern and reads the
objects) on that bucket alone, and only while the dataset is there. The stack's own bucket needs no grant: the VM
already uses its objects (infra/resources/bucket.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import pulumi
import pulumi_gcp as gcp

from infra.config.local_data import Upload
from infra.config.settings import Settings
from workload.core.config import PipelineConfig
from workload.core.data_source import GCS, parse_share, parse_source, parse_template

OBJECT_VIEWER = "roles/storage.objectViewer"


def other_buckets(pipeline: PipelineConfig, stack_bucket: str) -> list[str]:
    """The buckets other than the stack's that the (resolved) dataset, held-out files and chat template are in."""
    sources = [parse_source(pipeline.dataset)]
    if pipeline.eval_data is not None and parse_share(pipeline.eval_data) is None:
        sources.append(parse_source(pipeline.eval_data))
    if pipeline.chat_template is not None:
        sources.append(parse_template(pipeline.chat_template))
    buckets = [s.bucket for s in sources if s.kind == GCS and s.bucket != stack_bucket]
    return list(dict.fromkeys(b for b in buckets if b))


@dataclass(frozen=True)
class DataAccessArgs:
    pipeline: PipelineConfig  # resolved: local files already replaced by their copies' URLs
    uploads: Sequence[Upload]
    bucket: pulumi.Input[str]  # the stack's bucket, where the copies go
    stack_bucket: str  # its name, known before it exists
    reader: pulumi.Input[str]  # the VM's IAM member ("serviceAccount:…")


class DataAccess(pulumi.ComponentResource):
    def __init__(self, name: str, args: DataAccessArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-sft:infra:DataAccess", name, None, opts)
        child = pulumi.ResourceOptions(parent=self)
        # Named by the object, not its place in a list: a file added before another does not replace the other.
        self.copies = [
            gcp.storage.BucketObject(
                f"{name}-{upload.object_name.replace('/', '-')}",
                bucket=args.bucket,
                name=upload.object_name,
                source=pulumi.FileAsset(upload.path) if upload.path else pulumi.StringAsset(upload.content or ""),
                opts=child,
            )
            for upload in args.uploads
        ]
        self.grants = [
            gcp.storage.BucketIAMMember(
                f"{name}-reader-{bucket}", bucket=bucket, role=OBJECT_VIEWER, member=args.reader, opts=child
            )
            for bucket in other_buckets(args.pipeline, args.stack_bucket)
        ]
        self.ready: list[pulumi.Resource] = [*self.copies, *self.grants]
        self.register_outputs({"objects": [c.name for c in self.copies]})


def declare(s: Settings, bucket: pulumi.Input[str], service_account_email: pulumi.Input[str]) -> list[pulumi.Resource]:
    """The resolved dataset's copies in `bucket` (the stack's) and the hosts' read-only grant on another bucket it is
    in: nothing for a Hub dataset or one in the stack's own bucket."""
    if not s.data_uploads and not other_buckets(s.pipeline, s.checkpoint_bucket):
        return []
    access = DataAccess(
        f"{s.instance_name}-dataset",
        DataAccessArgs(
            pipeline=s.pipeline,
            uploads=s.data_uploads,
            bucket=bucket,
            stack_bucket=s.checkpoint_bucket,
            reader=pulumi.Output.concat("serviceAccount:", service_account_email),
        ),
    )
    return access.ready
