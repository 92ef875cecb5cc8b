"""The machine the run trains on: one TPU VM with its data disk, or a slice's hosts (a multi-host accelerator type,
infra/resources/slice.py), each with the SSH firewall and OS Login key that let the tasks in and autostop's grant. A
Spot or on-demand VM is, by default, in a managed instance group of one that recreates it (infra/resources/vm_group.py).

The two differ only where Google does: a VM has a data disk, an address and an instance id; a slice's hosts
cannot share a disk (the model is kept in the bucket too), need a firewall for their own traffic, and are named by
their group. `Machine` is what the rest of the stack needs of either: the bucket's grant, the tasks' target and
triggers, and the outputs of its kind.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable, Mapping

import pulumi

from infra.config.settings import Settings
from infra.config.ssh_key_trust import OsLoginKey, OsLoginKeyArgs
from infra.pricing.cost import data_disk_performance
from infra.resources import apis, group
from infra.resources.autostop import AutostopAccess, AutostopAccessArgs, SliceAutostopAccess, SliceAutostopAccessArgs
from infra.resources.disk import DataDisk, DataDiskArgs
from infra.resources.network import SliceFirewall, SliceFirewallArgs, SshFirewall, SshFirewallArgs
from infra.resources.slice import TpuSlice, TpuSliceArgs
from infra.resources.tasks import slice_target, slice_target_json, vm_target, vm_target_json
from infra.resources.vm import TpuVm, TpuVmArgs
from infra.resources.vm_group import TpuVmGroup, TpuVmGroupArgs
from workload.core.contract import KEPT_PREFIX, MOUNT_POINT, RUNS_PREFIX


@dataclass(frozen=True)
class Machine:
    service_account_email: pulumi.Output[str]  # what the hosts act as: the bucket's grants name it
    identity: pulumi.Output[str]  # what the tasks' triggers hold: new hosts re-run every task
    ready: list[pulumi.Resource]  # what must exist before a task connects
    target_json: Callable[[pulumi.Output[str]], pulumi.Output[str]]  # the tasks' target, given the bucket's URL
    main_host: pulumi.Output[str]  # the VM's instance name, or worker 0's: where a person's ssh goes
    external_ip: pulumi.Output[str | None]  # None on a slice, which is reached through IAP only
    outputs: dict[str, Any]  # the stack outputs of its kind


def declare(settings: Settings, services: Mapping[str, pulumi.Resource]) -> Machine:
    return _slice(settings, services) if settings.is_slice else _vm(settings, services)


@dataclass(frozen=True)
class WithoutHosts:
    """What stays of the machine while a finished run publishes from the bucket (infra/resources/bucket_publish.py):
    the hosts' account, which the bucket's grants name, and the outputs of what is still there."""

    service_account_email: pulumi.Output[str]
    target_json: Callable[[pulumi.Output[str]], pulumi.Output[str]]  # what scripts/tpu-sft reads, given the bucket
    outputs: dict[str, Any]


GONE = "gone"  # the instance id of hosts Compute Engine no longer has


def declare_without_hosts(s: Settings, services: Mapping[str, pulumi.Resource]) -> WithoutHosts:
    """The data disk (the kept model's first copy), the firewalls and the OS Login key as they were, and a group's
    autostop grant (on the project); no VM, group or template, and no VM's autostop grant, which is on the VM itself.
    The account is the one the hosts had: the one named, or the project's default, as a group's template gets it."""
    _ssh_firewall(s)
    _os_login_key(s)
    names = group.host_names(group.base_instance_name(s), s.accelerator.hosts)
    outputs: dict[str, Any]
    if s.is_slice:
        SliceFirewall(f"{s.instance_name}-slice", SliceFirewallArgs(network=s.network, tag=s.instance_name))
        outputs = {"instanceGroupName": s.instance_name, "hostNames": names, "hosts": s.accelerator.hosts}
    else:
        disk = _data_disk(s)
        name = names[0] if s.recovers else s.instance_name
        outputs = {"instanceName": name, "dataDiskName": disk.name, "dataDiskMountPoint": MOUNT_POINT}
        outputs |= {"instanceGroupName": s.instance_name} if s.recovers else {}
    account = group.service_account_email(s, services[apis.COMPUTE])
    if (s.is_slice and s.autostop != "off") or s.recovers:
        SliceAutostopAccess(
            f"{s.instance_name}-autostop",
            SliceAutostopAccessArgs(project=s.project, stack=s.stack, service_account_email=account),
        )

    def target_json(bucket_url: pulumi.Output[str]) -> pulumi.Output[str]:
        """The hosts by name, as scripts/tpu-sft asks Compute Engine of them (an address they no longer have: the
        name), and where the model and the run's log are in the bucket."""

        def target(url: str) -> dict[str, Any]:
            kept, runs = f"{url}/{KEPT_PREFIX}", f"{url}/{RUNS_PREFIX}"
            if s.is_slice:
                return slice_target(s, GONE, names, {}, None, kept, runs)
            return vm_target(s, outputs["instanceName"], GONE, outputs["instanceName"], kept, runs)

        return bucket_url.apply(lambda url: json.dumps(target(url), sort_keys=True))

    return WithoutHosts(service_account_email=account, target_json=target_json, outputs=outputs)


def runs_url(bucket_url: pulumi.Output[str]) -> pulumi.Output[str]:
    """Where training checkpoints outlive the hosts (the `checkpointsUrl` output)."""
    return bucket_url.apply(lambda url: f"{url}/{RUNS_PREFIX}")


def kept_url(bucket_url: pulumi.Output[str]) -> pulumi.Output[str]:
    """Where the kept model is in the bucket: a slice's only copy, the VM's copy of its data disk's."""
    return bucket_url.apply(lambda url: f"{url}/{KEPT_PREFIX}")


def _data_disk(s: Settings) -> DataDisk:
    performance = data_disk_performance(s.data_disk_type)
    return DataDisk(
        f"{s.instance_name}-data",
        DataDiskArgs(
            zone=s.zone,
            size_gb=s.data_disk_size_gb,
            disk_type=s.data_disk_type,
            labels=dict(s.labels),
            keep_on_destroy=s.keep_data_disk,
            provisioned_iops=performance.iops,
            provisioned_throughput=performance.mib_per_s,
        ),
    )


def _vm(s: Settings, services: Mapping[str, pulumi.Resource]) -> Machine:
    data_disk = _data_disk(s)
    firewall = _ssh_firewall(s)
    access_key = _os_login_key(s)
    if s.recovers:
        return _vm_in_a_group(s, services, data_disk, [firewall, *access_key])
    vm = TpuVm(
        s.instance_name, TpuVmArgs(settings=s, data_disk_self_link=data_disk.self_link, network_tag=s.instance_name)
    )
    if s.autostop != "off":
        AutostopAccess(
            f"{s.instance_name}-autostop",
            AutostopAccessArgs(
                project=s.project,
                zone=s.zone,
                stack=s.stack,
                instance_name=vm.name,
                service_account_email=vm.service_account_email,
            ),
        )
    return Machine(
        service_account_email=vm.service_account_email,
        identity=vm.instance_id,
        ready=[vm, firewall, data_disk, *access_key],
        target_json=lambda bucket_url: vm_target_json(
            s, vm.name, vm.instance_id, vm.external_ip, kept_url(bucket_url), runs_url(bucket_url)
        ),
        main_host=vm.name,
        external_ip=vm.external_ip,
        outputs={"instanceName": vm.name, "dataDiskName": data_disk.name, "dataDiskMountPoint": MOUNT_POINT},
    )


def _vm_in_a_group(
    s: Settings, services: Mapping[str, pulumi.Resource], data_disk: DataDisk, access: list[pulumi.Resource]
) -> Machine:
    """The VM in a group of one that recreates it (infra/resources/vm_group.py): to the tasks the same VM, by its
    numbered name; autostop resizes the group to 0 with the slice's grant (recovery_needs_autostop keeps it on)."""
    vm = TpuVmGroup(
        s.instance_name,
        TpuVmGroupArgs(
            settings=s, data_disk_name=data_disk.name, network_tag=s.instance_name, compute_api=services[apis.COMPUTE]
        ),
    )
    SliceAutostopAccess(
        f"{s.instance_name}-autostop",
        SliceAutostopAccessArgs(project=s.project, stack=s.stack, service_account_email=vm.service_account_email),
    )
    return Machine(
        service_account_email=vm.service_account_email,
        identity=vm.instance_id,
        ready=[vm.group, data_disk, *access],
        target_json=lambda bucket_url: vm_target_json(
            s, vm.name, vm.instance_id, vm.external_ip, kept_url(bucket_url), runs_url(bucket_url)
        ),
        main_host=vm.name,
        external_ip=vm.external_ip,
        outputs={
            "instanceName": vm.name,
            "instanceGroupName": vm.group_name,
            "dataDiskName": data_disk.name,
            "dataDiskMountPoint": MOUNT_POINT,
        },
    )


def _slice(s: Settings, services: Mapping[str, pulumi.Resource]) -> Machine:
    # No data disk (the hosts cannot share one): the model is kept in the bucket too.
    firewall = _ssh_firewall(s)
    slice_firewall = SliceFirewall(
        f"{s.instance_name}-slice", SliceFirewallArgs(network=s.network, tag=s.instance_name)
    )
    access_key = _os_login_key(s)
    hosts = TpuSlice(
        s.instance_name, TpuSliceArgs(settings=s, network_tag=s.instance_name, compute_api=services[apis.COMPUTE])
    )
    if s.autostop != "off":
        SliceAutostopAccess(
            f"{s.instance_name}-autostop",
            SliceAutostopAccessArgs(
                project=s.project, stack=s.stack, service_account_email=hosts.service_account_email
            ),
        )

    def target_json(bucket_url: pulumi.Output[str]) -> pulumi.Output[str]:
        names, ids, group = hosts.host_names, hosts.host_ids, hosts.flex_start_group
        return slice_target_json(s, hosts.group_id, names, ids, group, kept_url(bucket_url), runs_url(bucket_url))

    return Machine(
        service_account_email=hosts.service_account_email,
        identity=hosts.identity,
        # The MIG, declared to wait until every host exists and the group is stable; a FLEX_START group is filled by
        # the first task instead (infra/resources/slice.py).
        ready=[*hosts.ready, firewall, slice_firewall, *access_key],
        target_json=target_json,
        main_host=hosts.host_names.apply(lambda names: names[0]),
        external_ip=pulumi.Output.from_input(None),
        outputs={
            "instanceGroupName": hosts.name,
            "acceleratorType": s.accelerator.name,
            "hosts": hosts.hosts,
            "hostNames": hosts.host_names,  # worker 0 first: the worker ids the phases give the hosts
            "chips": s.accelerator.chips,
        },
    )


def _ssh_firewall(s: Settings) -> SshFirewall:
    """The SSH allow on the hosts' network tag (their instance name), and a deny of everything else."""
    return SshFirewall(
        f"{s.instance_name}-ssh",
        SshFirewallArgs(network=s.network, source_ranges=s.ssh_source_ranges, target_tag=s.instance_name),
    )


def _os_login_key(s: Settings) -> list[OsLoginKey]:
    if s.ssh_access != "oslogin":
        return []
    args = OsLoginKeyArgs(project=s.project, account=s.os_login_account or "", public_key=s.ssh_public_key)
    return [OsLoginKey(f"{s.instance_name}-oslogin-key", args)]
