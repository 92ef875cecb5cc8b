"""Publishing with no TPU VM: a `pulumi up` that adds a publish destination to a finished run whose VM is gone
declares no VM and no phase, and publishes the kept model from the checkpoint bucket, on the machine that runs
`pulumi up`.

When (`finished_without_hosts`), all three at once, read as the program runs, in preview and `up` alike:
- a destination is set (tpu-sft:publishGcsUri, publishHubRepo, publishHubAdapterRepo);
- Compute Engine has no host of the stack now (`vm_status.vm_now`: the VM, or a group's or slice's first host):
  autostop deleted the VM, or resized its group to 0;
- the stack's state says the run finished with exactly these settings: the last phase's task succeeded with every
  setting as now (its `TPU_SFT_PIPELINE`, `PipelineConfig.phase_settings` of the last phase: a new eval setting is a
  new run of eval, which needs a VM), or this task published it before with them. The state is read with the engine's
  `readStackResourceOutputs`, as infra/resources/vm_outside_state.py reads it; where it does not answer, nothing is
  known finished and the program declares the VM as before.
Then the kept model is where keep put it, gs://<bucket>/kept/<run>/ (a slice keeps it there, a VM copies its data
disk's there, manifest last), and the task below publishes it from there. Otherwise the hosts and the phases are
declared as always: a new setting needs them.

The task runs `python -m remote.stack publish --model gs://… …` (remote/stack/publish_here.py), which runs the same
`python -m workload.publish` the VM's task runs, on the bucket's URL: every file checked against the kept manifest,
the eval gate with the stack's evalGate and evalMargin (workload/eval/gate.py), then the upload. It needs a Python with
the publish's libraries, checked at preview: .maxtext-venv's, or $TPU_SFT_PUBLISH_PYTHON. Who writes is who runs
`pulumi up`: the Hub with the stack's write token (its secret on the task's stdin, never in its environment) or
$HF_WRITE_TOKEN; Cloud Storage with this machine's Application Default Credentials, which need
`roles/storage.objectUser` on a destination bucket other than the stack's. The program cannot grant that: it does not
know which account those credentials are, so the preview names the command that grants it.

The data disk, the firewall, the bucket and its grants stay declared as they were (infra/resources/machine.py
`declare_without_hosts`); what goes from the state is what Compute Engine no longer has (the VM), or what a later
`pulumi up` that trains makes again at once: a group and its template, the VM's autostop grant, the phases' tasks.
"""

from __future__ import annotations

import json
import os
import shlex
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Sequence

import pulumi
from pulumi_command import local

from infra.config.settings import Settings
from infra.resources import group, vm_outside_state, vm_status
from infra.resources.publish import destination_bucket
from infra.resources.tasks import last_json_line
from remote.stack.publish_here import PublishError, publish_python, transfer_line
from workload.core.contract import KEPT_PREFIX, PHASES, PIPELINE_ENV, PROJECT_PYTHON

COMMAND = "command:local:Command"
PUBLISH_HERE = f"{PROJECT_PYTHON} -m remote.stack publish"  # scripts/tpu-sft publish
ROOT = Path(__file__).resolve().parents[2]  # where `pulumi up` runs the task


@dataclass(frozen=True)
class FinishedRun:
    """The run the stack's state says finished with these settings: its name, its kept model in the bucket and size."""

    run_name: str
    model_url: str
    kept_bytes: int

    def to_json(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)


def task_name(s: Settings) -> str:
    """The name the VM's publish task has (infra/resources/publish.py): one task publishes, from either place."""
    return f"{s.instance_name}-pipeline-publish"


def finished_without_hosts(s: Settings) -> FinishedRun | None:
    """The finished run to publish from the bucket, or None: the program declares the hosts and the phases."""
    if not s.publishes or _host_now(s):
        return None
    finished = _finished_in_state(s, json.dumps(s.pipeline.phase_settings(PHASES[-1]), sort_keys=True))
    if finished is not None:
        try:
            publish_python(ROOT, os.environ)
        except PublishError as error:
            raise pulumi.RunError(f"publishing from the bucket with no VM: {error}") from None
        pulumi.log.info(no_vm_line(s, finished))
    return finished


def _host_now(s: Settings) -> bool:
    name = group.host_names(group.base_instance_name(s), 1)[0] if s.is_slice or s.recovers else s.instance_name
    return vm_status.vm_now(s, name) is not None


def _finished_in_state(s: Settings, settings: str) -> FinishedRun | None:
    try:
        resources = vm_outside_state.stack_resources()
    except Exception as error:  # the invoke's failure, whose type the SDK does not export
        pulumi.log.debug(f"{vm_outside_state.READ_STATE} did not answer ({error}): the VM is declared")
        return None
    last_phase = f"{s.instance_name}-pipeline-{PHASES[-1]}"
    for urn, resource in resources.items():
        outputs: dict[str, Any] = resource.get("outputs") or {}
        name = urn.rsplit("::", 1)[-1]
        if resource.get("type") != COMMAND:
            continue
        if name == last_phase and (outputs.get("environment") or {}).get(PIPELINE_ENV) == settings:
            summary = last_json_line(outputs.get("stdout"))
            if summary.get("ok") and summary.get("run_name"):
                return FinishedRun(summary["run_name"], _model_url(s, summary), int(summary.get("kept_bytes") or 0))
        triggers = outputs.get("triggers") or []
        published_here = str(outputs.get("create") or "").startswith(PUBLISH_HERE)
        if name == task_name(s) and published_here and len(triggers) == 3 and triggers[0] == settings:
            return FinishedRun(**json.loads(triggers[2]))
    return None


def _model_url(s: Settings, summary: dict[str, Any]) -> str:
    """Where the kept model is in the bucket: its copy (a VM's), the kept dir itself (a slice's), else by its name."""
    kept = str(summary.get("kept_dir") or "")
    return str(summary.get("kept_copy") or (kept if kept.startswith("gs://") else "")) or (
        f"gs://{s.checkpoint_bucket}/{KEPT_PREFIX}/{summary['run_name']}"
    )


def no_vm_line(s: Settings, finished: FinishedRun) -> str:
    """The preview's line: no VM, what is published from where, and how long the bytes take (an estimate)."""
    where = ", ".join([*([s.publish_gcs_uri] if s.publish_gcs_uri else []), *(f"hf://{r}" for r in s.hub_repos)])
    line = (
        f"no VM: run {finished.run_name} finished with these settings and Compute Engine has no VM of the stack now, "
        f"so this update makes none and publishes {finished.model_url} to {where} from this machine; "
        + (f"estimate: {transfer_line(finished.kept_bytes)}" if finished.kept_bytes else "its size unknown")
    )
    bucket = destination_bucket(s)
    if bucket is not None:
        line += (
            f"; Cloud Storage is written with this machine's credentials, which need roles/storage.objectUser on "
            f"gs://{bucket}: gcloud storage buckets add-iam-policy-binding gs://{bucket} "
            '--member="user:$(gcloud config get-value account)" --role=roles/storage.objectUser'
        )
    return line


def command(s: Settings, finished: FinishedRun, token_on_stdin: bool) -> str:
    argv = ["--model", finished.model_url]
    for flag, value in (("--hub", s.publish_hub_repo), ("--hub-adapter", s.publish_hub_adapter_repo)):
        argv += [flag, value] if value else []
    argv += ["--gcs", s.publish_gcs_uri] if s.publish_gcs_uri else []
    argv += ["--public"] if s.publish_hub_public and s.hub_repos else []
    argv += ["--eval-gate", s.eval_gate, "--eval-margin", f"{s.eval_margin:g}"]
    argv += ["--token-stdin"] if token_on_stdin else []
    return f"{PUBLISH_HERE} {shlex.join(argv)}"


class BucketPublishTask(pulumi.ComponentResource):
    """The publish task on this machine: its inputs are the settings the run finished with, the destinations with the
    gate, and the finished run, which the next program run reads back from the state (`_finished_in_state`)."""

    def __init__(
        self,
        s: Settings,
        finished: FinishedRun,
        after: Sequence[pulumi.Resource],
        opts: pulumi.ResourceOptions | None = None,
    ):
        name = task_name(s)
        super().__init__("tpu-sft:infra:BucketPublishTask", name, None, opts)
        token = pulumi.Output.secret(s.hf_write_token) if s.hf_write_token else None
        settings = json.dumps(s.pipeline.phase_settings(PHASES[-1]), sort_keys=True)
        where = json.dumps(s.publish_destinations, sort_keys=True)
        self.command = local.Command(
            name,
            create=command(s, finished, token is not None),
            stdin=token,
            triggers=[settings, where, finished.to_json()],
            add_previous_output_in_env=False,
            logging=local.Logging.STDOUT_AND_STDERR,
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(after)),
        )
        self.register_outputs({})


def declare(s: Settings, finished: FinishedRun, after: Sequence[pulumi.Resource]) -> BucketPublishTask:
    return BucketPublishTask(s, finished, after)
