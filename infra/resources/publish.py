"""The publish task: after the last phase, `python -m remote publish` pushes the kept model to the stack's
destinations (opt-in: declared only when tpu-sft:publishGcsUri or publishHubRepo is set).

Its inputs are the target, the last phase's settings (a new model, or a new eval of it, publishes again: the gate
and the card read the eval's report) and the destinations with the gate's mode and margin (evalGate, evalMargin;
a new gate re-runs publishing alone): a change of any re-runs it, and a re-run with the same model sends nothing
(workload/publish/__main__.py). The Hub write token never enters its environment: like the read token, a separate
task pipes it over stdin into a 0600 file on the VM, so that only that task's outputs are secret.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pulumi
from pulumi_command import local

from infra.config.settings import Settings
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


class PublishTask(pulumi.ComponentResource):
    def __init__(self, name: str, args: PublishArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-sft:infra:PublishTask", name, None, opts)
        after: list[pulumi.Resource] = [args.export]
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


def declare(s: Settings, tasks: PostDeployTasks) -> PublishTask | None:
    """The opt-in publish task, after the last phase, on the VM or a slice's worker 0 (which reads the kept model from
    the bucket); None where no destination is set."""
    if not s.publishes:
        return None
    return PublishTask(
        f"{s.instance_name}-pipeline-publish",
        PublishArgs(
            settings=s,
            target_json=tasks.target_json,
            identity=tasks.identity,
            write_token=pulumi.Output.secret(s.hf_write_token) if s.hf_write_token else None,
            export=tasks.phases[PHASES[-1]],
        ),
    )
