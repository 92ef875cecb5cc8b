"""One concept of a managed instance group (MIG) of TPU VMs, for both machines that use one: a multi-host slice
(infra/resources/slice.py: its hosts, made in bulk, one ICI topology) and the single VM that Google does not bring back
by itself (infra/resources/vm_group.py: a Spot or on-demand VM in a group of one, which the group repairs with the same
name and its data disk).

What both share lives here: the instance template made from the stack's settings (each host is the single VM of
infra/resources/vm.py in every fact it can be: image, boot disk, network and tag, service account, scheduling,
reservation affinity, labels and metadata), the hosts' numbered names, the metadata that lets autostop resize the group
to 0 (workload/spend/autostop.py), and the read of each host's instance id once the group is stable.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.config.settings import IMAGE, Settings
from infra.resources import flex_start
from infra.resources.vm import BOOT_DISK_TYPE, RESERVATION_KEY, SERVICE_ACCOUNT_SCOPES, scheduling_fields
from workload.core.contract import AUTOSTOP_PREFIX
from workload.spend import autostop

# A base instance name ending in a hyphen and hash signs makes the MIG number its hosts instead of appending four
# random characters. The Compute API reference, InstanceGroupManager.baseInstanceName: "If you want the MIG to
# assign sequential numbers instead of a random string, then end the base instance name with a hyphen followed by
# one or more hash symbols. The hash symbols indicate the number of digits. For example, a base instance name of
# "vm-###" results in "vm-001" as a VM name." Two digits hold the 64 hosts of a v6e-256.
# infra/config/cross_key_rules.py keeps the name short enough (SLICE_NAME_MAX).
HOST_NUMBER = "-##"
# How long `pulumi up` waits on the group: creating it, patching it, deleting it, and above all its wait for STABLE,
# which the provider times against the create timeout even on an update (terraform-provider-google
# `computeIGMWaitForInstanceStatus`). Its default, 15 minutes, is for any MIG; a slice's hosts, up to 64 TPU VMs of a
# v6e-256, are all created and booted together. With capacity that takes minutes (not measured here); without it
# (a reservation too small, a zone out of v6e, too little TPU quota) the MIG keeps retrying and never gets there, while
# each host it did make bills. Twice the default leaves the largest slice room and still ends that wait. Google gives
# no capacity or quota answer before the hosts are asked for, so the timeout is the signal: docs/slices.md ("If the
# slice never comes up") says what its error looks like, its likely causes and what to do.
GROUP_TIMEOUT = "30m"
# What a preview shows for a host the group has not made yet: autostop resized the group to 0
# (workload/spend/autostop.py), and this update sets its size back. The `up` itself reads the new host's id once the
# group is stable.
NOT_MADE_YET = "none yet: made by this update"


def host_names(base_instance_name: str, count: int) -> list[str]:
    """The hosts' names in worker order, from the MIG's numbered base instance name: "tpu-sft-dev-##" and 4 give
    tpu-sft-dev-01 … tpu-sft-dev-04. That a group of N hosts is numbered exactly 1 … N, with no gap, is read from
    "sequential numbers" and the "vm-001" example above; the reference does not say it outright (docs/slices.md)."""
    prefix = base_instance_name.rstrip("#")
    digits = len(base_instance_name) - len(prefix)
    return [f"{prefix}{number:0{digits}d}" for number in range(1, count + 1)]


def base_instance_name(s: Settings) -> str:
    return f"{s.instance_name}{HOST_NUMBER}"


def autostop_metadata(s: Settings, hosts: int) -> dict[str, str]:
    """What each host's autostop needs to agree with the others before the group is resized to 0
    (workload/spend/autostop.py): the group, every host's name, and where they report. A group of one agrees with
    itself: its one host resizes the group to 0, never deletes itself (the group would repair it)."""
    return {
        autostop.GROUP_KEY: s.instance_name,
        autostop.HOSTS_KEY: ",".join(host_names(base_instance_name(s), hosts)),
        autostop.REPORTS_KEY: f"gs://{s.checkpoint_bucket}/{AUTOSTOP_PREFIX}",
    }


@dataclass(frozen=True)
class FoundHost:
    instance_id: str
    external_ip: str | None


def hosts_now(names: list[str], s: Settings) -> dict[str, FoundHost]:
    """Host name → its instance id and external IP (Compute Engine's `instances.get`, through pulumi-gcp's
    getInstance). Called once the group's outputs are known: in `up`, after it was created or updated and is stable."""
    found = {}
    for name in names:
        try:
            instance = gcp.compute.get_instance(name=name, zone=s.zone, project=s.project)
        except Exception as error:  # the invoke's failure, whose type the SDK does not export
            # pulumi-gcp answers a 404 with "<the instance> not found" (terraform-provider-google
            # HandleDataSourceNotFoundError). Only a preview may meet a host that is not there yet.
            if not (pulumi.runtime.is_dry_run() and "not found" in str(error)):
                raise
            found[name] = FoundHost(NOT_MADE_YET, None)
            continue
        configs = instance.network_interfaces[0].access_configs if instance.network_interfaces else None
        found[name] = FoundHost(instance.instance_id, configs[0].nat_ip if configs else None)
    return found


def template_scheduling(s: Settings) -> gcp.compute.InstanceTemplateSchedulingArgs:
    return gcp.compute.InstanceTemplateSchedulingArgs(
        **scheduling_fields(s),
        max_run_duration=(
            gcp.compute.InstanceTemplateSchedulingMaxRunDurationArgs(seconds=s.max_run_hours * 3600)
            if s.max_run_hours
            else None
        ),
    )


def template_reservation_affinity(s: Settings) -> gcp.compute.InstanceTemplateReservationAffinityArgs | None:
    if flex_start.takes_no_reservation(s):
        return gcp.compute.InstanceTemplateReservationAffinityArgs(type=flex_start.NO_RESERVATION)
    if not s.reservation:
        return None
    return gcp.compute.InstanceTemplateReservationAffinityArgs(
        type="SPECIFIC_RESERVATION",
        specific_reservation=gcp.compute.InstanceTemplateReservationAffinitySpecificReservationArgs(
            key=RESERVATION_KEY, values=[s.reservation]
        ),
    )


def instance_template(
    name: str,
    s: Settings,
    *,
    machine_type: str,
    network_tag: str,
    metadata: dict[str, str],
    extra_disks: list[gcp.compute.InstanceTemplateDiskArgs],
    parent: pulumi.Resource,
) -> gcp.compute.InstanceTemplate:
    """The hosts' template. Not named: a template is immutable, so a change creates a new one (an auto-named one,
    beside the old) before the group moves to it and the old one is deleted."""
    return gcp.compute.InstanceTemplate(
        f"{name}-template",
        machine_type=machine_type,
        tags=[network_tag],
        labels=dict(s.labels),
        disks=[
            gcp.compute.InstanceTemplateDiskArgs(
                boot=True,
                auto_delete=True,
                source_image=IMAGE,
                disk_size_gb=s.boot_disk_size_gb,
                disk_type=BOOT_DISK_TYPE,
            ),
            *extra_disks,
        ],
        network_interfaces=[
            gcp.compute.InstanceTemplateNetworkInterfaceArgs(
                network=s.network,
                subnetwork=s.subnetwork,
                access_configs=(
                    [gcp.compute.InstanceTemplateNetworkInterfaceAccessConfigArgs()] if s.external_ip else []
                ),
            )
        ],
        service_account=gcp.compute.InstanceTemplateServiceAccountArgs(
            email=s.service_account, scopes=list(SERVICE_ACCOUNT_SCOPES)
        ),
        scheduling=template_scheduling(s),
        reservation_affinity=template_reservation_affinity(s),
        metadata=metadata,
        opts=pulumi.ResourceOptions(parent=parent),
    )


def service_account_email(s: Settings, compute_api: pulumi.Resource | None) -> pulumi.Output[str]:
    """The hosts' service account, needed by the bucket's grant before they exist: the one named, or the project's
    default compute account, which the API attaches when none is (as for the single VM)."""
    if s.service_account:
        return pulumi.Output.from_input(s.service_account)
    return gcp.compute.get_default_service_account_output(
        project=s.project,
        opts=pulumi.InvokeOutputOptions(depends_on=[compute_api] if compute_api else None),
    ).email
