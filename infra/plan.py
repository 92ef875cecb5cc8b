"""Which pipeline phases a config change would re-run, and why — before anyone runs `pulumi up`.

    python -m infra.plan --base BASE.yaml --head Pulumi.dev.yaml

Both files are stack config files (`Pulumi.<stack>.yaml`), e.g. the base branch's copy and the pull
request's. The answer comes from the same `phase_inputs` that sets each phase's `triggers` in
`__main__.py`, so it is what `pulumi up` will do. Nothing is contacted; no key or secret is read.
Exit status: 0 printed a plan, 2 (every CLI's bad input) a config file or setting is invalid.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from infra.cost import estimate
from infra.phases import phase_inputs
from infra.settings import Settings, parse
from infra.stack_file import read_stack_config
from workload.config import ConfigError
from workload.contract import EXIT_BAD_INPUT, PHASES


def load(path: Path, stack: str) -> Settings:
    return parse(read_stack_config(path), stack=stack)


def vm_identity(s: Settings) -> dict[str, Any]:
    """The settings feeding VM fields that are ForceNew in pulumi-gcp's Instance (name, zone, boot_disk.*,
    scheduling.provisioning_model/preemptible/max_run_duration, reservation_affinity): changing one replaces
    the VM, and a new VM re-runs every phase."""
    return {
        "gcp:project": s.project,
        "gcp:zone": s.zone,
        "tpu-sft:instanceName": s.instance_name,
        "tpu-sft:bootDiskSizeGb": s.boot_disk_size_gb,
        "tpu-sft:provisioningModel": s.provisioning_model,
        "tpu-sft:reservation": s.reservation,
        "tpu-sft:maxRunHours": s.max_run_hours,
    }


def reach(s: Settings) -> dict[str, Any]:
    """The settings feeding the target every phase is handed (infra/tasks.py): a new way to reach the VM, or a new
    place for its checkpoints, changes every phase's inputs, so every phase re-runs."""
    return {
        "tpu-sft:checkpointBucket": s.checkpoint_bucket,
        "tpu-sft:access": s.access,
        "tpu-sft:sshUser": s.ssh_user,
        "tpu-sft:sshPublicKeyPath": s.ssh_public_key_path,
    }


def _changes(base: dict[str, Any], head: dict[str, Any]) -> list[str]:
    return [f"`{k}`: {json.dumps(base.get(k))} → {json.dumps(head.get(k))}"
            for k in sorted(set(base) | set(head)) if base.get(k) != head.get(k)]


def plan(base: Settings, head: Settings) -> list[tuple[str, bool, str]]:
    """(phase, re-runs?, why) for each phase, in order."""
    vm_changes = _changes(vm_identity(base), vm_identity(head))
    reach_changes = _changes(reach(base), reach(head))
    before, after = phase_inputs(base.pipeline), phase_inputs(head.pipeline)
    rows = []
    for phase in PHASES:
        if vm_changes:
            rows.append((phase, True, "the VM is replaced: " + ", ".join(vm_changes)))
            continue
        if reach_changes:
            rows.append((phase, True, "the VM is reached differently: " + ", ".join(reach_changes)))
            continue
        changed = _changes(before[phase], after[phase])
        rows.append((phase, bool(changed), ", ".join(changed)))
    return rows


def render(base: Settings, head: Settings) -> str:
    rows = plan(base, head)
    lines = ["### tpu-sft: pipeline phases this change re-runs", "", "| phase | re-runs | because |", "|---|---|---|"]
    lines += [f"| {phase} | {'**yes**' if reruns else 'no'} | {why} |" for phase, reruns, why in rows]
    costs = [
        estimate(s.accelerator.chips, s.price_per_chip_hour, s.pipeline.steps, s.pipeline.per_device_batch_size)
        for s in (base, head)
    ]
    lines += [
        "",
        f"Estimated cost of a full run: ${costs[0].run_usd:.2f} → ${costs[1].run_usd:.2f} "
        f"(${costs[1].hourly_usd:.2f}/h while the VM exists).",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.plan", description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, required=True, help="stack config before the change")
    parser.add_argument("--head", type=Path, required=True, help="stack config after the change")
    parser.add_argument("--stack", default="dev", help="stack name, for its default labels (default: dev)")
    args = parser.parse_args(argv)
    try:
        base, head = load(args.base, args.stack), load(args.head, args.stack)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    print(render(base, head))
    return 0


if __name__ == "__main__":
    sys.exit(main())
