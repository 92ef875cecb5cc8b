"""The post-deploy tasks: one pulumi-command `local.Command` per pipeline phase, and the run task after bootstrap,
each running the project's own CLI (`python -m remote …`) against the VM, or against every host of a slice.

pulumi-command re-runs `create` when any input changes, not only `triggers`. So each task's inputs are the target (which
names the VM instance, or the slice's hosts) and only the settings it depends on (`PipelineConfig.phase_settings`), in
both `environment` and `triggers`: `pulumi preview` shows which task would re-run and why, and a `pulumi up` with
nothing changed runs nothing (no SSH at all). The run task's settings are every setting: it starts the whole run on the
host with them (or finds it running), and each phase task after it follows its own phase's part. Nothing is written
while the program is evaluated: the settings travel as the tasks' inputs. The HF token never enters a task's environment
(that would make every task's output secret): a separate task pipes it over stdin into a 0600 file on each host.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

import pulumi
from pulumi_command import local

from infra.config.settings import Settings
from infra.resources.ssh_commands import iap_proxy_command, ssh_host
from remote.pipeline.profile import VM, slice_host
from workload.core.contract import (
    HF_TOKEN_SECRET,
    PHASES,
    PIPELINE_ENV,
    RESUME_KIT_DIR,
    RUN_TASK,
    TARGET_ENV,
    phase_command,
    put_secret_command,
    run_command,
)

# Relative to the project directory, where `pulumi up` runs: the same state on every machine.
KNOWN_HOSTS_DIR = ".tpu-sft/known_hosts"
TASK_LOGS_DIR = ".tpu-sft/logs"  # each task's whole log, one folder per VM or slice (remote/pipeline/task_log.py)


@dataclass(frozen=True)
class TasksArgs:
    settings: Settings
    target_json: pulumi.Output[str]  # remote.ssh.target JSON: vm_target or slice_target
    # The VM's instance id, or the slice's MIG id and its hosts' instance ids: a new one is new hosts, and every
    # phase re-runs on them.
    identity: pulumi.Output[str]
    after: Sequence[pulumi.Resource]  # what must exist before anything connects (the VM or MIG, its firewall)


def _reach(s: Settings, known_hosts: str) -> dict[str, Any]:
    """How the tasks log in: the stack's one SSH key pair, its IAP gateway (`%h` is the instance name), and host
    keys recorded on first use (over IAP the tunnel itself is authenticated by Google)."""
    return {
        "user": s.ssh_user,
        "key_path": s.ssh_private_key_path,
        "known_hosts": f"{KNOWN_HOSTS_DIR}/{known_hosts}",
        "task_logs": f"{TASK_LOGS_DIR}/{known_hosts}",
        "gateway": iap_proxy_command(s, "%h", "%p") if s.access == "iap" else None,
        "trust_on_first_use": True,
    }


def vm_target(
    s: Settings, instance_name: str, instance_id: str, external_ip: str | None, kept_url: str, runs_url: str
) -> dict[str, Any]:
    """remote.ssh.target JSON of the VM. Host keys are pinned per instance id: a replaced VM is a new host, not a
    changed key. The model is kept on the data disk and copied to `kept_url`, where it is fetched with no VM."""
    return {
        "host": ssh_host(s, instance_name, external_ip),
        **_reach(s, f"{s.stack}-{instance_id}"),
        # A VM its group recreates keeps what a new boot disk resumes from on the data disk (resume_kit.py).
        "profile": replace(
            VM, kept_copy_dir=kept_url, runs_dir=runs_url, resume_kit=RESUME_KIT_DIR if s.recovers else None
        ).to_mapping(),
    }


def slice_target(
    s: Settings,
    group_id: str,
    host_names: Sequence[str],
    host_ids: Mapping[str, str],
    flex_start_group: str | None,
    kept_url: str,
    runs_url: str,
) -> dict[str, Any]:
    """remote.ssh.target JSON of a slice: its hosts in worker order, worker 0 the main host (`host`), the rest
    `workers`, each reached by instance name through IAP (infra/config/cross_key_rules.py refuses direct access on a
    slice). Worker ids are positions in that order, not the TPU runtime's own numbering. Host keys are pinned per MIG,
    and each host's key to its instance id, where known: a recreated host's new key is let in by its new id. A
    flex-start slice's target names its group, which the first task fills and waits on."""
    return {
        "host": host_names[0],
        "workers": list(host_names[1:]),
        **_reach(s, f"{s.stack}-slice-{group_id}"),
        "host_ids": dict(host_ids),
        "profile": slice_host(kept_url, runs_url).to_mapping(),
        **({"flex_start_group": flex_start_group} if flex_start_group else {}),
    }


def vm_target_json(
    s: Settings,
    instance_name: pulumi.Output[str],
    instance_id: pulumi.Output[str],
    external_ip: pulumi.Output[str | None],
    kept_url: pulumi.Output[str],
    runs_url: pulumi.Output[str],
) -> pulumi.Output[str]:
    return pulumi.Output.all(instance_name, instance_id, external_ip, kept_url, runs_url).apply(
        lambda a: json.dumps(vm_target(s, *a), sort_keys=True)
    )


def slice_target_json(
    s: Settings,
    group_id: pulumi.Output[str],
    host_names: pulumi.Output[list[str]],
    host_ids: pulumi.Output[dict[str, str]],
    flex_start_group: pulumi.Output[str | None],
    kept_url: pulumi.Output[str],
    runs_url: pulumi.Output[str],
) -> pulumi.Output[str]:
    return pulumi.Output.all(group_id, host_names, host_ids, flex_start_group, kept_url, runs_url).apply(
        lambda a: json.dumps(slice_target(s, *a), sort_keys=True)
    )


def last_json_line(stdout: str | None) -> dict[str, Any]:
    """A phase's summary: the last JSON line of its stdout (nothing yet during a preview)."""
    for line in reversed((stdout or "").splitlines()):
        if line.startswith("{"):
            try:
                return json.loads(line)
            except json.JSONDecodeError:
                break
    return {}


class PostDeployTasks(pulumi.ComponentResource):
    def __init__(self, name: str, args: TasksArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-sft:infra:PostDeployTasks", name, None, opts)
        s = args.settings
        target_json = self.target_json = args.target_json
        self.identity = args.identity
        previous: list[pulumi.Resource] = list(args.after)
        if s.hf_token:  # else the tasks place $HF_TOKEN of `pulumi up`, where it is set
            hf_token = pulumi.Output.secret(s.hf_token)
            token = local.Command(
                f"{name}-hf-token",
                create=put_secret_command(HF_TOKEN_SECRET),
                stdin=hf_token,
                environment={TARGET_ENV: target_json},
                triggers=[args.identity, hf_token],
                add_previous_output_in_env=False,
                opts=pulumi.ResourceOptions(parent=self, depends_on=previous),
            )
            previous = [*previous, token]

        def task(suffix: str, create: str, settings: dict[str, Any], after: list[pulumi.Resource]) -> local.Command:
            return local.Command(
                f"{name}-{suffix}",
                create=create,
                environment={TARGET_ENV: target_json, PIPELINE_ENV: json.dumps(settings, sort_keys=True)},
                triggers=[args.identity, settings],
                # The previous run's whole stdout would come back as one environment variable: unbounded.
                add_previous_output_in_env=False,
                logging=local.Logging.STDOUT_AND_STDERR,
                opts=pulumi.ResourceOptions(parent=self, depends_on=after),
            )

        self.phases: dict[str, local.Command] = {}
        for phase in PHASES:
            self.phases[phase] = task(phase, phase_command(phase), s.pipeline.phase_settings(phase), previous)
            previous = [self.phases[phase]]
            if phase == PHASES[0]:
                # After the install and before the phases: the run, with every setting (the last phase's).
                self.run = task(RUN_TASK, run_command(), s.pipeline.phase_settings(PHASES[-1]), previous)
                previous = [self.run]
        self.summaries = {phase: c.stdout.apply(last_json_line) for phase, c in self.phases.items()}
        self.register_outputs({"summaries": self.summaries})
