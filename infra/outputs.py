"""The stack's outputs: what a preview says before anything runs (what `pulumi destroy` leaves, the sweep's choice,
the run's length, cost and throughput), how to reach the machine (`scripts/tpu-sft` reads `target`, `project`,
`zone` and the instance or group name: remote/stack/), and what the phases' JSON summaries said (worker 0's on a
slice)."""

from __future__ import annotations

import pulumi

from infra.config import run_length
from infra.config.settings import Settings
from infra.plan import billing, machines
from infra.plan.on_destroy import on_destroy
from infra.plan.throughput import predicted
from infra.preflight.compile_step import hbm_beside_preflight
from infra.pricing.cost import estimate
from infra.pricing.eval_cost import eval_of
from infra.resources.bucket_publish import BucketPublishTask, FinishedRun
from infra.resources.machine import Machine, WithoutHosts, runs_url
from infra.resources.publish import PublishTask
from infra.resources.ssh_commands import gcloud_ssh_command, ssh_command
from infra.resources.tasks import PostDeployTasks, last_json_line
from workload.core.contract import RUN_TASK
from workload.run.phase_outcome import outcome_lines


def export(
    s: Settings,
    machine: Machine,
    bucket_url: pulumi.Output[str],
    tasks: PostDeployTasks,
    published: PublishTask | None,
) -> None:
    # `pulumi destroy` runs no program: the same line as the preview's warning stays readable
    # (infra/plan/on_destroy.py).
    pulumi.export("onDestroy", on_destroy(s))
    pulumi.export("sweepChoice", s.sweep_choice)  # perDeviceBatchSize auto: chosen and runner-up (docs/preflight.md)
    for name, value in machine.outputs.items():
        pulumi.export(name, value)
    pulumi.export("zone", s.zone)
    reach = pulumi.Output.all(machine.main_host, machine.external_ip)
    pulumi.export("sshCommand", reach.apply(lambda a: ssh_command(s, a[0], a[1])))
    pulumi.export("gcloudSshCommand", machine.main_host.apply(lambda name: gcloud_ssh_command(s, name)))
    pulumi.export("checkpointsUrl", runs_url(bucket_url))
    _cost(s)
    _run(s, tasks)
    # What remote/stack/ reads: the target every task gets (a key path, never a key), and the project.
    pulumi.export("target", tasks.target_json)
    pulumi.export("project", s.project)
    if published is not None:
        pulumi.export("published", published.command.stdout.apply(lambda out: last_json_line(out).get("published")))


def export_without_hosts(
    s: Settings,
    kept: WithoutHosts,
    bucket_url: pulumi.Output[str],
    finished: FinishedRun,
    published: BucketPublishTask,
) -> None:
    """A finished run published from the bucket with no VM (infra/resources/bucket_publish.py): what still holds,
    where the model is, and what was published; nothing of a VM or of the phases, which did not run."""
    pulumi.export("onDestroy", on_destroy(s))
    for name, value in kept.outputs.items():
        pulumi.export(name, value)
    pulumi.export("zone", s.zone)
    pulumi.export("project", s.project)
    pulumi.export("checkpointsUrl", runs_url(bucket_url))
    pulumi.export("modelDir", finished.model_url)  # what scripts/tpu-sft fetch-model reads, with no VM
    pulumi.export("target", kept.target_json(bucket_url))  # status and logs: the VM is gone, the log is in the bucket
    pulumi.export(
        "phases", {RUN_TASK: f"run {finished.run_name} finished before: no VM, published from {finished.model_url}"}
    )
    pulumi.export("published", published.command.stdout.apply(lambda out: last_json_line(out).get("published")))


def _cost(s: Settings) -> None:
    throughput = predicted(s.pipeline)  # the preflight's record, the bench's table, or the seed's figure
    evaluated = eval_of(s.pipeline)
    hours = 0.0 if evaluated is None else evaluated.hours
    cost = estimate(
        s.accelerator.chips, s.tpu_price.usd_per_chip_hour, s.pipeline.steps, throughput.step_seconds, hours
    )
    pulumi.export("runLength", run_length.output(s))  # what the estimates below are of
    # The eval phase, an estimate per task and model, first run and base cached; null where evalTasks is off.
    pulumi.export("evalEstimate", None if evaluated is None else evaluated.output(cost.hourly_usd))
    pulumi.export("hourlyCostUsd", cost.hourly_usd)
    pulumi.export("throughput", throughput.output(s.pipeline) | {"trainingHours": cost.train_hours})
    pulumi.export("estimatedRunHours", cost.run_hours)
    pulumi.export("estimatedRunCostUsd", cost.run_usd)
    pulumi.export("tpuPrice", s.tpu_price.output())  # which price model the estimate used, and its basis
    pulumi.export("machineCosts", machines.costs(s))  # the same run on each machine of one VM, where it fits
    for name, value in billing.outputs(s).items():
        pulumi.export(name, value)


def _run(s: Settings, tasks: PostDeployTasks) -> None:
    # Each phase's outcome in one line: the phases' own output is gone from the screen when `pulumi up` ends
    # (workload/run/phase_outcome.py), its outputs are printed last.
    pulumi.export(
        "phases",
        pulumi.Output.all(*tasks.summaries.values()).apply(
            lambda summaries: outcome_lines(dict(zip(tasks.summaries, summaries, strict=True)))
        ),
    )
    trained = tasks.summaries["export"]
    pulumi.export("finalStep", trained.apply(lambda r: r.get("final_step")))
    pulumi.export("finalLoss", trained.apply(lambda r: r.get("final_loss")))
    # The held-out loss before the first update and after the last pass, and whether it fell
    # (workload/measure/learning.py).
    pulumi.export(
        "evalLoss",
        trained.apply(
            lambda r: (
                {k: r.get(f"eval_loss_{k}") for k in ("first", "final")} | {"learned": r.get("learned")}
                if "learned" in r
                else None
            )
        ),
    )
    pulumi.export("trainedCheckpoint", trained.apply(lambda r: r.get("trained_checkpoint")))
    pulumi.export("modelDir", trained.apply(lambda r: r.get("kept_dir")))
    pulumi.export("verify", trained.apply(lambda r: r.get("verify")))
    trained_on = tasks.summaries["train"]
    pulumi.export("mfu", trained_on.apply(lambda r: r.get("mfu")))  # null off TPU: the summary's mfu_reason says why
    pulumi.export("tokensPerSecond", trained_on.apply(lambda r: r.get("tokens_per_s")))
    pulumi.export("hbmPerChip", trained_on.apply(lambda r: hbm_beside_preflight(r, s.pipeline)))
    # Measured at the end of the export job: each host's chips × the time since it booted, every host's reading
    # added up on a slice (workload/spend/bill.py).
    bill = trained.apply(lambda r: r.get("bill") or {})
    pulumi.export("chipHoursUsed", bill.apply(lambda b: b.get("chip_hours")))
    pulumi.export(
        "costUsd",
        bill.apply(
            lambda b: None if b.get("chip_hours") is None else round(b["chip_hours"] * s.tpu_price.usd_per_chip_hour, 2)
        ),
    )
