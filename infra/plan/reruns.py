"""Which pipeline phases a config change would re-run, and why — before anyone runs `pulumi up`.

    python -m infra.plan --base BASE.yaml --head Pulumi.dev.yaml [--preflight RECORD.json] [--data RECORD.json] [--json]

Both files are stack config files (`Pulumi.<stack>.yaml`), e.g. the base branch's copy and the pull
request's. The answer comes from the same `PipelineConfig.phase_settings` that sets each phase's `triggers`
in infra/resources/tasks.py, so it is what `pulumi up` will do (a local dataset read and hashed as the program does).
Nothing is contacted; no key or secret is read.
`--preflight` adds what scripts/preflight found for the head's train inputs (whether the step fits, its
bounds); `--data` what scripts/preflight --data found in the head's data: what stops the run first, above the
rows, the table last, or the one line saying why the data was not checked. `--json` prints the rows as JSON instead,
for a workflow to test.
Exit status: 0 printed a plan, 2 (every CLI's bad input) a config file or setting is invalid.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
from dataclasses import replace
from pathlib import Path
from typing import Any

from infra.config.data_size import epochs_as_tokens
from infra.config.local_data import resolve
from infra.config.read_settings import AUTO_BATCH_KEY, parse
from infra.config.settings import Settings
from infra.config.stack_file import read_stack_config
from infra.plan import machines
from infra.plan.throughput import Throughput, predicted
from infra.preflight.compile_step import summary, take_the_sweeps_batch, train_fingerprint
from infra.preflight.data_preflight import data_fingerprint
from infra.pricing.cost import CostEstimate, estimate
from infra.pricing.eval_cost import eval_hours, eval_of
from infra.resources.flex_start import group_description
from workload.core.config import ConfigError
from workload.core.contract import EXIT_BAD_INPUT, PHASES
from workload.core.run_length import sequence_length


def load(path: Path, stack: str) -> Settings:
    """The settings as `pulumi up` hands them to the phases: the length in tokens (infra/config/data_size.py), a local
    dataset named by its copies (infra/config/local_data.py), read relative to the project directory, as the program
    reads it."""
    settings = parse(epochs_as_tokens(read_stack_config(path))[0], stack=stack)  # epochs: as `pulumi up` counts them
    with contextlib.suppress(ConfigError):  # perDeviceBatchSize auto without a sweep on file: plan() says so
        settings = take_the_sweeps_batch(settings)
    return replace(settings, pipeline=resolve(settings.pipeline, settings.checkpoint_bucket).pipeline)


def vm_identity(s: Settings) -> dict[str, Any]:
    """The settings feeding VM fields that are ForceNew in pulumi-gcp's Instance (name, zone, boot_disk.*,
    scheduling.provisioning_model/preemptible/max_run_duration, reservation_affinity), or that the program replaces
    the VM for because the provider would stop it to update them (infra/resources/vm.py STOP_TO_UPDATE: machine type,
    service account, network): changing one replaces the VM, and a new VM re-runs every phase."""
    return {
        "tpu-sft:acceleratorType": s.accelerator.name,
        "tpu-sft:serviceAccount": s.service_account,
        "tpu-sft:network": s.network,
        "tpu-sft:subnetwork": s.subnetwork,
        "gcp:project": s.project,
        "gcp:zone": s.zone,
        "tpu-sft:instanceName": s.instance_name,
        "tpu-sft:bootDiskSizeGb": s.boot_disk_size_gb,
        "tpu-sft:provisioningModel": s.provisioning_model,
        "tpu-sft:reservation": s.reservation,
        "tpu-sft:maxRunHours": s.max_run_hours,
        # In effect, not as set: a SPOT or STANDARD VM moved into its group of one (or out) is a new VM, named
        # <instanceName>-01; the data disk stays (infra/resources/vm_group.py).
        "tpu-sft:recovery": "auto" if s.recovers else "off",
    }


def slice_identity(s: Settings) -> dict[str, Any]:
    """The settings feeding a slice's identity, which the tasks' triggers and host keys name: its managed instance
    group's name and zone are ForceNew. Other host settings change the instance template, which reaches the hosts
    only when the group recreates them (infra/resources/slice.py, OPPORTUNISTIC): they re-run nothing, except what makes
    a FLEX_START slice's group anew (`_flex_start_changes`)."""
    return {"gcp:project": s.project, "gcp:zone": s.zone, "tpu-sft:instanceName": s.instance_name}


def _flex_start_changes(base: Settings, head: Settings) -> list[str]:
    """Another run cap, or flex-start turned on or off, replaces a FLEX_START slice's whole group
    (infra/resources/flex_start.py `group_description`): new hosts, every phase re-runs."""
    if group_description(base) == group_description(head):
        return []
    keys = ("tpu-sft:provisioningModel", "tpu-sft:maxRunHours")
    return _changes(
        dict(zip(keys, (base.provisioning_model, base.max_run_hours), strict=True)),
        dict(zip(keys, (head.provisioning_model, head.max_run_hours), strict=True)),
    )


def _host_changes(base: Settings, head: Settings) -> list[str]:
    """Other hosts altogether: from one VM to a slice or back, or a slice of another size (the target lists every
    host). Between single-host types the VM is replaced (vm_identity)."""
    if base.accelerator.hosts == head.accelerator.hosts:
        return []
    key = "tpu-sft:acceleratorType"
    return _changes({key: base.accelerator.name}, {key: head.accelerator.name})


def reach(s: Settings) -> dict[str, Any]:
    """The settings feeding the target every phase is handed (infra/resources/tasks.py): a new way to reach the VM, or a
    new place for its checkpoints, changes every phase's inputs, so every phase re-runs."""
    return {
        "tpu-sft:checkpointBucket": s.checkpoint_bucket,
        "tpu-sft:access": s.access,
        "tpu-sft:sshUser": s.ssh_user,
        "tpu-sft:sshPublicKeyPath": s.ssh_public_key_path,
    }


def _changes(base: dict[str, Any], head: dict[str, Any]) -> list[str]:
    return [
        f"`{k}`: {json.dumps(base.get(k))} → {json.dumps(head.get(k))}"
        for k in sorted(set(base) | set(head))
        if base.get(k) != head.get(k)
    ]


def plan(base: Settings, head: Settings) -> list[tuple[str, bool, str]]:
    """(task, re-runs?, why) for each phase, in order, then the publish task when either side publishes."""
    identity = slice_identity if head.is_slice else vm_identity
    host_changes = _host_changes(base, head)
    replaced = _changes(identity(base), identity(head)) + (_flex_start_changes(base, head) if head.is_slice else [])
    reach_changes = _changes(reach(base), reach(head))
    # perDeviceBatchSize auto with no sweep on file: the head's batch is where a sweep would start, not the batch it
    # will train with, so it is not compared (below, train waits on the sweep instead).
    awaited = replace(head.pipeline, per_device_batch_size=base.pipeline.per_device_batch_size)
    before, after = base.pipeline, awaited if head.batch_auto else head.pipeline
    what = "the slice" if head.is_slice else "the VM"
    everything = (
        f"the hosts change: {', '.join(host_changes)}"
        if host_changes
        else f"{what} is replaced: {', '.join(replaced)}"
        if replaced
        else f"{what} is reached differently: {', '.join(reach_changes)}"
        if reach_changes
        else ""
    )
    rows = [
        (phase, True, everything) if everything else (phase, bool(changed), ", ".join(changed))
        for phase, changed in ((p, _changes(before.phase_settings(p), after.phase_settings(p))) for p in PHASES)
    ]
    if head.batch_auto:  # the batch, and so whether train re-runs, waits on a sweep
        unknown = (
            f"`tpu-sft:{AUTO_BATCH_KEY}` is auto and no sweep of these train inputs is on file (scripts/preflight)"
        )
        trained = PHASES[PHASES.index("train") :]
        rows = [(p, True, why or unknown) if p in trained else (p, reruns, why) for p, reruns, why in rows]
    exported = _changes(before.phase_settings(PHASES[-1]), after.phase_settings(PHASES[-1]))
    publish = _publish_row(base, head, everything, exported)
    return rows if publish is None else [*rows, publish]


def _publish_row(
    base: Settings, head: Settings, everything: str, export_changes: list[str]
) -> tuple[str, bool, str] | None:
    """The publish task's inputs (infra/resources/publish.py): the target, the last phase's settings, the
    destinations and the eval gate."""
    if not head.publishes:
        return None if not base.publishes else ("publish", False, "publishing turned off: what was published stays")
    where = _changes(base.publish_destinations, head.publish_destinations)
    if not base.publishes:
        return ("publish", True, "publishing turned on: " + ", ".join(where))
    changed = [everything] if everything else [*export_changes, *where]
    return ("publish", bool(changed), ", ".join(changed))


def throughput_line(head: Settings, throughput: Throughput, cost: CostEstimate) -> str:
    """The configuration trained, what is predicted of its step, the training time it gives, and where that comes
    from."""
    p = head.pipeline
    batch = f"{p.per_device_batch_size} × {sequence_length(p.max_target_length, p.profile):,} tokens a chip"
    configuration = f"{p.trainer} loop, {batch} on {head.accelerator.name}"
    if throughput.tokens_per_second_per_chip is None or throughput.mfu is None:
        return f"Throughput: {configuration}; training {cost.train_hours:.2f} h ({throughput.source})."
    return (
        f"Throughput: {configuration}: {throughput.step_seconds:.3f} s a step, "
        f"{throughput.tokens_per_second_per_chip:,.0f} tokens/s per chip, {throughput.mfu:.0%} MFU, "
        f"bound by {throughput.bound}; training {cost.train_hours:.2f} h (predicted: {throughput.source})."
    )


def preflight_lines(head: Settings, record: dict[str, Any] | None) -> list[str]:
    """What the compiler said of the head's training step, from scripts/preflight's record of the same train
    inputs; a record of other inputs is named, not shown."""
    if record is None:
        return []
    if record.get("train_fingerprint") != train_fingerprint(head.pipeline):
        return ["", "Preflight: the record given is of other train inputs than this change's; not shown."]
    line = f"Preflight (the TPU compiler, no TPU): {summary(record)}."
    if record["fits"]:
        b = record["bounds"]
        line += (
            f" At the chip's peak no step is faster than {b['step_seconds_at_least']:.3f} s, no run shorter than "
            f"{b['run_hours_at_least']:.2f} h"
            + (f" or cheaper than ${b['usd_at_least']:.2f}" if b["usd_at_least"] is not None else "")
            + " (bounds, not predictions)."
        )
    return ["", line]


def _cell(value: Any) -> str:
    text = "—" if value is None else ", ".join(map(str, value)) if isinstance(value, list) else str(value)
    return text.replace("|", "\\|")  # a value of the data's (a path) must not end the table's cell


def data_lines(head: Settings, record: dict[str, Any] | None) -> tuple[list[str], list[str]]:
    """(above the plan, below it) from scripts/preflight --data's record of the head's data: what stops the run
    goes first, where a reviewer cannot miss it; the table, or why the data was not checked, last."""
    if record is None:
        return [], []
    if record.get("data_fingerprint") != data_fingerprint(head.pipeline):
        return [], ["", "Data preflight: the record given is of other data than this change's; not shown."]
    if record.get("not_checked"):
        return [], ["", f"Data preflight: not checked (the check holds no credentials): {record['not_checked']}."]
    findings = record["findings"]
    top = ["**The data preflight found what stops the run** (scripts/preflight --data):", ""]
    top += [f"- `{f['key']}`: {f['problem']}. Fix: {f['fix']}" for f in findings] + [""]
    table = record["table"]
    bottom = ["", "Data preflight (a sample, read with the model's tokenizer):", "", "| | |", "|---|---|"]
    bottom += [f"| {name} | {_cell(value)} |" for name, value in table.items()]
    return (top if findings else []), (bottom if table else [])


def render(
    base: Settings,
    head: Settings,
    preflight: dict[str, Any] | None = None,
    data: dict[str, Any] | None = None,
) -> str:
    rows = plan(base, head)
    above, below = data_lines(head, data)
    lines = [
        *above,
        "### tpu-sft: pipeline tasks this change re-runs",
        "",
        "| task | re-runs | because |",
        "|---|---|---|",
    ]
    lines += [f"| {task} | {'**yes**' if reruns else 'no'} | {why} |" for task, reruns, why in rows]
    throughputs = [predicted(s.pipeline) for s in (base, head)]
    costs = [
        estimate(
            s.accelerator.chips, s.tpu_price.usd_per_chip_hour, s.pipeline.steps, t.step_seconds, eval_hours(s.pipeline)
        )
        for s, t in zip((base, head), throughputs, strict=True)
    ]
    evaluated = eval_of(head.pipeline)
    price = head.tpu_price
    lines += [
        "",
        f"Estimated cost of a full run: ${costs[0].run_usd:.2f} → ${costs[1].run_usd:.2f} "
        f"(${costs[1].hourly_usd:.2f}/h while the {'slice' if head.is_slice else 'VM'} exists).",
        throughput_line(head, throughputs[1], costs[1]),
        *([] if evaluated is None else [evaluated.line(costs[1].hourly_usd)]),
        machines.line(head),
        f"Price model: {price.provisioning_model} at ${price.usd_per_chip_hour:.2f} per chip-hour ({price.basis}).",
    ]
    return "\n".join(lines + preflight_lines(head, preflight) + below)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m infra.plan", description=__doc__.split("\n\n")[0])
    parser.add_argument("--base", type=Path, required=True, help="stack config before the change")
    parser.add_argument("--head", type=Path, required=True, help="stack config after the change")
    parser.add_argument("--stack", default="dev", help="stack name, for its default labels (default: dev)")
    parser.add_argument("--preflight", type=Path, help="scripts/preflight's JSON record of the head's train inputs")
    parser.add_argument("--data", type=Path, help="scripts/preflight --data's JSON record of the head's data")
    parser.add_argument("--json", action="store_true", help="print the rows as JSON: [{task, reruns, why}]")
    args = parser.parse_args(argv)
    try:
        base, head = load(args.base, args.stack), load(args.head, args.stack)
        preflight = None if args.preflight is None else _record(args.preflight)
        data = None if args.data is None else _data_record(args.data)
    except ConfigError as error:
        print(f"error: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if args.json:
        print(json.dumps([{"task": t, "reruns": r, "why": w} for t, r, w in plan(base, head)]))
    else:
        print(render(base, head, preflight, data))
    return 0


def _record(path: Path) -> dict[str, Any]:
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as error:
        raise ConfigError(
            "--preflight", f"{path} is not a preflight record ({error})", "give scripts/preflight's JSON line"
        ) from None
    if not isinstance(record, dict) or "fits" not in record:
        raise ConfigError("--preflight", f"{path} is not a preflight record", "give scripts/preflight's JSON line")
    return record


def _data_record(path: Path) -> dict[str, Any]:
    not_one = ConfigError(
        "--data", f"{path} is not a data preflight's record", "give scripts/preflight --data's JSON line"
    )
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        raise not_one from None
    if not isinstance(record, dict) or not isinstance(record.get("findings"), list) or "table" not in record:
        raise not_one
    return record
