"""The publish task: after the last phase, `python -m remote publish` pushes the kept model to the stack's
destinations (opt-in: declared only when tpu-sft:publishGcsUri or publishHubRepo is set).

Its inputs are the target, the last phase's settings (a new model, or a new eval of it, publishes again: the gate
and the card read the eval's report) and the destinations with the gate's mode and margin (evalGate, evalMargin;
a new gate re-runs publishing alone): a change of any re-runs it, and a re-run with the same model sends nothing
(workload/publish/__main__.py). The Hub write token never enters its environment: like the read token, a separate
task pipes it over stdin into a 0600 file on the VM, so that only that task's outputs are secret.

Publishing to Cloud Storage writes as the VM's (or the slice's) service account, which needs
`roles/storage.objectUser` on the destination bucket: objects create, get, list and delete, the delete because a new
model replaces objects of an older one at the same path (tests/workload/publish/test_publish_bucket_iam.py). The
program grants it, on that bucket alone, before the task runs; the stack's own bucket needs none.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp
from pulumi_command import local

from infra.config.settings import Settings
from infra.resources import vm_status
from infra.resources.tasks import PostDeployTasks
from workload.core.contract import (
    HF_WRITE_TOKEN_SECRET,
    PHASES,
    PIPELINE_ENV,
    PUBLISH_ENV,
    TARGET_ENV,
    publish_command,
    put_secret_command,
)


@dataclass(frozen=True)
class PublishArgs:
    settings: Settings
    target_json: pulumi.Input[str]
    identity: pulumi.Input[str]  # the VM's instance id: a new VM publishes again
    write_token: pulumi.Output[str] | None  # a secret Output, or None: then $HF_WRITE_TOKEN of `pulumi up`
    export: pulumi.Resource  # the last phase's task: publishing starts after it
    writer: pulumi.Input[str]  # the hosts' IAM member ("serviceAccount:…"), which writes a Cloud Storage destination


OBJECT_USER = "roles/storage.objectUser"


def destination_bucket(s: Settings) -> str | None:
    """The bucket of tpu-sft:publishGcsUri where it is not the stack's own (which the hosts already write)."""
    if not s.publish_gcs_uri:
        return None
    bucket = s.publish_gcs_uri.removeprefix("gs://").split("/", 1)[0]
    return None if bucket == s.checkpoint_bucket else bucket


class PublishTask(pulumi.ComponentResource):
    def __init__(self, name: str, args: PublishArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-sft:infra:PublishTask", name, None, opts)
        after: list[pulumi.Resource] = [args.export]
        bucket = destination_bucket(args.settings)
        if bucket is not None:
            after.append(
                gcp.storage.BucketIAMMember(
                    f"{name}-writer-{bucket}",
                    bucket=bucket,
                    role=OBJECT_USER,
                    member=args.writer,
                    opts=pulumi.ResourceOptions(parent=self),
                )
            )
        if args.write_token is not None:
            after.append(
                local.Command(
                    f"{name}-hf-write-token",
                    create=put_secret_command(HF_WRITE_TOKEN_SECRET),
                    stdin=args.write_token,
                    environment={TARGET_ENV: args.target_json},
                    triggers=[args.identity, args.write_token],
                    add_previous_output_in_env=False,
                    opts=pulumi.ResourceOptions(parent=self, depends_on=[args.export]),
                )
            )
        where = json.dumps(args.settings.publish_destinations, sort_keys=True)
        pipeline = json.dumps(args.settings.pipeline.phase_settings(PHASES[-1]), sort_keys=True)
        self.command = local.Command(
            name,
            create=publish_command(),
            environment={TARGET_ENV: args.target_json, PIPELINE_ENV: pipeline, PUBLISH_ENV: where},
            triggers=[args.identity, pipeline, where],
            add_previous_output_in_env=False,
            logging=local.Logging.STDOUT_AND_STDERR,
            opts=pulumi.ResourceOptions(parent=self, depends_on=after),
        )
        self.register_outputs({})


def no_vm_to_publish_from(s: Settings) -> str:
    """One line for a stack that publishes while Compute Engine has no VM of its name (autostop deletes an idle one):
    the update makes a TPU VM to publish from, where the kept model could go from the bucket with no VM."""
    flags = " ".join(
        f"--{flag} {value}"
        for flag, value in (("hub", s.publish_hub_repo), ("hub-adapter", s.publish_hub_adapter_repo))
        if value
    )
    if s.publish_gcs_uri:
        flags = f"{flags} --gcs {s.publish_gcs_uri}".strip()
    return (
        f"no VM {s.instance_name} now: this update makes a TPU VM (billed) to publish from; a model already kept is "
        f"published from the bucket with no VM by `scripts/tpu-sft publish {flags}` (docs/publishing.md)"
    )


def declare(s: Settings, tasks: PostDeployTasks, service_account_email: pulumi.Input[str]) -> PublishTask | None:
    """The opt-in publish task, after the last phase, on the VM or a slice's worker 0 (which reads the kept model from
    the bucket); None where no destination is set."""
    if not s.publishes:
        return None
    if not s.is_slice and vm_status.vm_now(s) is None:
        pulumi.log.warn(no_vm_to_publish_from(s))
    return PublishTask(
        f"{s.instance_name}-pipeline-publish",
        PublishArgs(
            settings=s,
            target_json=tasks.target_json,
            identity=tasks.identity,
            write_token=pulumi.Output.secret(s.hf_write_token) if s.hf_write_token else None,
            export=tasks.phases[PHASES[-1]],
            writer=pulumi.Output.concat("serviceAccount:", service_account_email),
        ),
    )
