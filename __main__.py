"""tpu-sft: a reserved TPU VM, its SSH firewall, data disk and checkpoint bucket, and the fine-tuning run on it.

Wiring only: settings → infrastructure → post-deploy tasks → exports. Each piece lives in infra/; the tasks
run the remote CLI (`python -m remote phase …`), which ships workload/ to the VM. A multi-host accelerator type
(v6e-16 and up) declares a slice instead of the VM and its data disk (infra/slice.py), and the same tasks run on
every host of it.
"""

import pulumi

from infra import apis, billing, run_length, stack
from infra.autostop import AutostopAccess, AutostopAccessArgs, SliceAutostopAccess, SliceAutostopAccessArgs
from infra.bucket import Bucket, BucketArgs, region_of
from infra.cost import data_disk_performance, estimate
from infra.data_access import DataAccess, DataAccessArgs, other_buckets
from infra.disk import DataDisk, DataDiskArgs
from infra.network import SliceFirewall, SliceFirewallArgs, SshFirewall, SshFirewallArgs
from infra.on_destroy import model_lost_on_destroy, on_destroy
from infra.preflight import hbm_beside_preflight
from infra.publish import PublishArgs, PublishTask
from infra.slice import TpuSlice, TpuSliceArgs
from infra.ssh_commands import gcloud_ssh_command, ssh_command
from infra.ssh_key_trust import OsLoginKey, OsLoginKeyArgs
from infra.tasks import PostDeployTasks, TasksArgs, last_json_line, slice_target_json, vm_target_json
from infra.throughput import predicted
from infra.vm import TpuVm, TpuVmArgs
from workload.core.contract import KEPT_PREFIX, MOUNT_POINT, RUNS_PREFIX

settings = stack.settings()  # built once: perDeviceBatchSize auto and local data resolved (infra/stack.py)

# The APIs the stack calls, enabled by the stack itself, before anything that calls them (infra/apis.py).
services = apis.declare(settings)

# `pulumi destroy` runs no program, so the preview and update before it are where a model it would take with it is
# named; the output keeps the same line readable until then (infra/on_destroy.py).
lost = model_lost_on_destroy(settings)
if lost:
    pulumi.log.warn(lost)
pulumi.export("onDestroy", on_destroy(settings))
# perDeviceBatchSize auto: which configuration the sweep chose, and the runner-up (docs/preflight.md)
pulumi.export("sweepChoice", settings.sweep_choice)

labels = dict(settings.labels)
network_tag = settings.instance_name
throughput = predicted(settings.pipeline)  # the preflight's record, the bench's table, or the seed's figure
cost = estimate(
    settings.accelerator.chips, settings.tpu_price.usd_per_chip_hour, settings.pipeline.steps, throughput.step_seconds
)


def checkpoint_bucket(service_account_email: pulumi.Input[str]) -> Bucket:
    return Bucket(
        f"{settings.instance_name}-runs",
        BucketArgs(
            name=settings.checkpoint_bucket,
            location=region_of(settings.zone),
            labels={**labels, "tpu-sft-role": "checkpoints"},
            expire_prefixes=[f"{RUNS_PREFIX}/"],
            expire_after_days=settings.checkpoint_retention_days,
            keep_on_destroy=settings.keeps_bucket,
            object_users=[pulumi.Output.concat("serviceAccount:", service_account_email)],
        ),
    )


def data_access(checkpoints: Bucket, service_account_email: pulumi.Input[str]) -> list[pulumi.Resource]:
    """The local dataset's copies and the read-only grant on another bucket it is in (infra/data_access.py): nothing for
    a Hub dataset or one in the stack's own bucket."""
    if not settings.data_uploads and not other_buckets(settings.pipeline, settings.checkpoint_bucket):
        return []
    access = DataAccess(
        f"{settings.instance_name}-dataset",
        DataAccessArgs(
            pipeline=settings.pipeline,
            uploads=settings.data_uploads,
            bucket=checkpoints.name,
            stack_bucket=settings.checkpoint_bucket,
            reader=pulumi.Output.concat("serviceAccount:", service_account_email),
        ),
    )
    return access.ready


def os_login_key() -> list[OsLoginKey]:
    if settings.ssh_access != "oslogin":
        return []
    return [
        OsLoginKey(
            f"{settings.instance_name}-oslogin-key",
            OsLoginKeyArgs(
                project=settings.project, account=settings.os_login_account or "", public_key=settings.ssh_public_key
            ),
        )
    ]


def export_cost() -> None:
    pulumi.export("runLength", run_length.output(settings))  # what the estimates below are of
    pulumi.export("hourlyCostUsd", cost.hourly_usd)
    pulumi.export("throughput", throughput.output(settings.pipeline) | {"trainingHours": cost.train_hours})
    pulumi.export("estimatedRunHours", cost.run_hours)
    pulumi.export("estimatedRunCostUsd", cost.run_usd)
    pulumi.export("tpuPrice", settings.tpu_price.output())  # which price model the estimate used, and its basis
    for name, value in billing.outputs(settings).items():
        pulumi.export(name, value)


def hf_token() -> pulumi.Output[str] | None:
    return pulumi.Output.secret(settings.hf_token) if settings.hf_token else None


def export_run(tasks: PostDeployTasks) -> None:
    """What the phases' JSON summaries say (worker 0's on a slice)."""
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
    pulumi.export("hbmPerChip", trained_on.apply(lambda r: hbm_beside_preflight(r, settings.pipeline)))
    # Measured at the end of the export job: each host's chips × the time since it booted, every host's reading
    # added up on a slice (workload/spend/bill.py).
    bill = trained.apply(lambda r: r.get("bill") or {})
    pulumi.export("chipHoursUsed", bill.apply(lambda b: b.get("chip_hours")))
    pulumi.export(
        "costUsd",
        bill.apply(
            lambda b: (
                None
                if b.get("chip_hours") is None
                else round(b["chip_hours"] * settings.tpu_price.usd_per_chip_hour, 2)
            )
        ),
    )


def export_reach(tasks: PostDeployTasks) -> None:
    """What `scripts/tpu-sft` (remote/stack/) reads: the target every task gets (a key path, never a key) and the
    project, with `zone` and the VM's or group's name, to ask Compute Engine of a VM that does not answer."""
    pulumi.export("target", tasks.target_json)
    pulumi.export("project", settings.project)


def publish_after(tasks: PostDeployTasks, identity: pulumi.Input[str]) -> None:
    """The opt-in publish task, after export, on the VM or a slice's worker 0 (which reads the kept model from the
    bucket)."""
    if not settings.publishes:
        return
    published = PublishTask(
        f"{settings.instance_name}-pipeline-publish",
        PublishArgs(
            settings=settings,
            target_json=tasks.target_json,
            identity=identity,
            write_token=pulumi.Output.secret(settings.hf_write_token) if settings.hf_write_token else None,
            export=tasks.phases["export"],
        ),
    )
    pulumi.export("published", published.command.stdout.apply(lambda out: last_json_line(out).get("published")))


if settings.is_slice:
    # A slice: its hosts, their SSH firewall and the traffic between them, the bucket, and the same tasks run on
    # every host. No data disk (the hosts cannot share one): the model is kept in the bucket too.
    firewall = SshFirewall(
        f"{settings.instance_name}-ssh",
        SshFirewallArgs(network=settings.network, source_ranges=settings.ssh_source_ranges, target_tag=network_tag),
    )
    slice_firewall = SliceFirewall(
        f"{settings.instance_name}-slice", SliceFirewallArgs(network=settings.network, tag=network_tag)
    )
    access_key = os_login_key()
    hosts = TpuSlice(
        settings.instance_name,
        TpuSliceArgs(settings=settings, network_tag=network_tag, compute_api=services[apis.COMPUTE]),
    )
    checkpoints = checkpoint_bucket(hosts.service_account_email)
    dataset = data_access(checkpoints, hosts.service_account_email)
    if settings.autostop != "off":
        SliceAutostopAccess(
            f"{settings.instance_name}-autostop",
            SliceAutostopAccessArgs(
                project=settings.project,
                stack=settings.stack,
                service_account_email=hosts.service_account_email,
            ),
        )
    runs_url = checkpoints.url.apply(lambda url: f"{url}/{RUNS_PREFIX}")
    kept_url = checkpoints.url.apply(lambda url: f"{url}/{KEPT_PREFIX}")
    tasks = PostDeployTasks(
        f"{settings.instance_name}-pipeline",
        TasksArgs(
            settings=settings,
            target_json=slice_target_json(
                settings,
                hosts.group_id,
                hosts.host_names,
                hosts.host_ids,
                hosts.flex_start_group,
                kept_url,
                runs_url,
            ),
            identity=hosts.identity,
            hf_token=hf_token(),
            # The MIG, declared to wait until every host exists and the group is stable; a FLEX_START group is
            # filled by the first task instead (infra/slice.py).
            after=[*hosts.ready, firewall, slice_firewall, checkpoints, *access_key, *dataset],
        ),
    )
    pulumi.export("instanceGroupName", hosts.name)
    pulumi.export("zone", settings.zone)
    pulumi.export("acceleratorType", settings.accelerator.name)
    pulumi.export("hosts", hosts.hosts)
    pulumi.export("hostNames", hosts.host_names)  # worker 0 first: the worker ids the phases give the hosts
    pulumi.export("sshCommand", hosts.host_names.apply(lambda names: ssh_command(settings, names[0], None)))
    pulumi.export("gcloudSshCommand", hosts.host_names.apply(lambda names: gcloud_ssh_command(settings, names[0])))
    pulumi.export("chips", settings.accelerator.chips)
    pulumi.export("checkpointsUrl", runs_url)
    export_cost()
    export_run(tasks)
    export_reach(tasks)
    publish_after(tasks, hosts.identity)
else:
    data_disk = DataDisk(
        f"{settings.instance_name}-data",
        DataDiskArgs(
            zone=settings.zone,
            size_gb=settings.data_disk_size_gb,
            disk_type=settings.data_disk_type,
            labels=labels,
            keep_on_destroy=settings.keep_data_disk,
            provisioned_iops=data_disk_performance(settings.data_disk_type).iops,
            provisioned_throughput=data_disk_performance(settings.data_disk_type).mib_per_s,
        ),
    )
    firewall = SshFirewall(
        f"{settings.instance_name}-ssh",
        SshFirewallArgs(network=settings.network, source_ranges=settings.ssh_source_ranges, target_tag=network_tag),
    )
    access_key = os_login_key()
    vm = TpuVm(
        settings.instance_name,
        TpuVmArgs(settings=settings, data_disk_self_link=data_disk.self_link, network_tag=network_tag),
    )
    checkpoints = checkpoint_bucket(vm.service_account_email)
    dataset = data_access(checkpoints, vm.service_account_email)
    if settings.autostop != "off":
        AutostopAccess(
            f"{settings.instance_name}-autostop",
            AutostopAccessArgs(
                project=settings.project,
                zone=settings.zone,
                stack=settings.stack,
                instance_name=vm.name,
                service_account_email=vm.service_account_email,
            ),
        )
    runs_url = checkpoints.url.apply(lambda url: f"{url}/{RUNS_PREFIX}")
    tasks = PostDeployTasks(
        f"{settings.instance_name}-pipeline",
        TasksArgs(
            settings=settings,
            target_json=vm_target_json(settings, vm.name, vm.instance_id, vm.external_ip, runs_url),
            identity=vm.instance_id,
            hf_token=hf_token(),
            after=[vm, firewall, data_disk, checkpoints, *access_key, *dataset],
        ),
    )

    pulumi.export("instanceName", vm.name)
    pulumi.export("zone", settings.zone)
    pulumi.export("sshCommand", pulumi.Output.all(vm.name, vm.external_ip).apply(lambda a: ssh_command(settings, *a)))
    pulumi.export("gcloudSshCommand", vm.name.apply(lambda name: gcloud_ssh_command(settings, name)))
    pulumi.export("dataDiskName", data_disk.name)
    pulumi.export("dataDiskMountPoint", MOUNT_POINT)
    pulumi.export("checkpointsUrl", runs_url)
    export_cost()
    export_run(tasks)
    export_reach(tasks)
    publish_after(tasks, vm.instance_id)
