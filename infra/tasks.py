"""The post-deploy tasks: one pulumi-command `local.Command` per pipeline phase, each running the project's
own CLI (`python -m remote phase …`) against the VM.

pulumi-command re-runs `create` when any input changes, not only `triggers`. So each phase's inputs are the
target (which names the VM instance) and only the settings that phase depends on (infra/phases.py), in both
`environment` and `triggers`: `pulumi preview` shows which phase would re-run and why, and a `pulumi up` with
nothing changed runs nothing (no SSH at all). The HF token never enters a phase's environment (that would make
every phase's output secret): a separate task pipes it over stdin into a 0600 file on the VM.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from typing import Any, Sequence

import pulumi
from pulumi_command import local

from infra.access import iap_proxy_command, ssh_host
from infra.phases import phase_inputs
from infra.settings import Settings
from remote.profile import VM
from workload.contract import HF_TOKEN_SECRET, PHASES, PIPELINE_ENV, TARGET_ENV, phase_command, put_secret_command

# Relative to the project directory, where `pulumi up` runs: the same state on every machine.
KNOWN_HOSTS_DIR = ".tpu-sft/known_hosts"


@dataclass(frozen=True)
class TasksArgs:
    settings: Settings
    instance_name: pulumi.Output[str]
    instance_id: pulumi.Output[str]
    external_ip: pulumi.Output[str | None]
    runs_url: pulumi.Output[str]  # the workload's --runs-dir: gs://<checkpoint bucket>/runs
    hf_token: pulumi.Output[str] | None  # a secret Output, or None: then $HF_TOKEN of `pulumi up` is used
    after: Sequence[pulumi.Resource]  # what must exist before anything connects (the VM, its firewall)


def target(s: Settings, instance_name: str, instance_id: str, external_ip: str | None, runs_url: str) -> dict[str, Any]:
    """remote.target JSON. Host keys are pinned per instance id: a replaced VM is a new host, not a changed key.
    The first contact records the key: over IAP the tunnel itself is authenticated by Google."""
    return {
        "host": ssh_host(s, instance_name, external_ip),
        "user": s.ssh_user,
        "key_path": s.ssh_private_key_path,
        "known_hosts": f"{KNOWN_HOSTS_DIR}/{s.stack}-{instance_id}",
        "gateway": iap_proxy_command(s, "%h", "%p") if s.access == "iap" else None,
        "trust_on_first_use": True,
        "profile": replace(VM, runs_dir=runs_url).to_mapping(),
    }


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
        target_json = pulumi.Output.all(args.instance_name, args.instance_id, args.external_ip, args.runs_url).apply(
            lambda a: json.dumps(target(s, *a), sort_keys=True)
        )
        self.target_json = target_json
        previous: list[pulumi.Resource] = list(args.after)
        if args.hf_token is not None:
            token = local.Command(
                f"{name}-hf-token",
                create=put_secret_command(HF_TOKEN_SECRET),
                stdin=args.hf_token,
                environment={TARGET_ENV: target_json},
                triggers=[args.instance_id, args.hf_token],
                add_previous_output_in_env=False,
                opts=pulumi.ResourceOptions(parent=self, depends_on=previous),
            )
            previous = [*previous, token]
        inputs = phase_inputs(s.pipeline)
        self.phases: dict[str, local.Command] = {}
        for phase in PHASES:
            environment: dict[str, pulumi.Input[str]] = {
                TARGET_ENV: target_json, PIPELINE_ENV: json.dumps(inputs[phase], sort_keys=True),
            }
            triggers: list[Any] = [args.instance_id, inputs[phase]]
            command = local.Command(
                f"{name}-{phase}",
                create=phase_command(phase),
                environment=environment,
                triggers=triggers,
                # The previous run's whole stdout would come back as one environment variable: unbounded.
                add_previous_output_in_env=False,
                logging=local.Logging.STDOUT_AND_STDERR,
                opts=pulumi.ResourceOptions(parent=self, depends_on=previous),
            )
            self.phases[phase] = command
            previous = [command]
        self.summaries = {phase: c.stdout.apply(last_json_line) for phase, c in self.phases.items()}
        self.register_outputs({"summaries": self.summaries})
