"""The single TPU VM in a managed instance group (MIG) of one, for the provisioning models Google does not bring back
by itself (tpu-sft:recovery auto with SPOT or STANDARD: docs/restarts.md has Google's words and the table of every way
a VM ends).

Google's "Failure recovery of TPU instances": "In a MIG with single-host slices, if a TPU instance in a single-host
slice enters the TERMINATED state due to a hardware failure or an external event, such as Spot VM preemption, the MIG
repairs the instance by default. During the repair, the MIG recreates the instance with the same name." A MIG also
repairs a VM "deleted by an action not initiated by the MIG" (compute/docs/instance-groups/about-repair), and
"TPU instances in MIGs" names a target size of one "useful if you want to use MIG features like automatic repair for a
single instance".

The group is the one of infra/resources/group.py (the slice's), with what a group of one needs besides:
- its VM's name is the numbered one the slice's hosts get, `<instanceName>-01`, known before the group makes it and
  kept across repairs, so SSH, status, logs and the phases reach the same name;
- the data disk is the template's second disk, by name, and a stateful disk of the group with delete rule NEVER: "a
  managed instance group (MIG) that preserves the data on disks with a given device name for all of the MIG's VMs,
  even in the event of VM recreation—for example when a VM in the MIG is autohealed, updated, or recreated"
  (compute/docs/instance-groups/create-mig-with-basic-stateful-disks). The boot disk is new with each VM;
- individual mode (no bulk target size policy: Google's bulk mode is "only supported with instance templates that
  specify either a reservation-bound or flex-start provisioning model", compute/docs/instance-groups/
  bulk-create-instances-in-mig), repair on failure (the slice's is off), and a proactive update that refreshes
  metadata in place and recreates the VM (its name and disk kept) only for what cannot change in place.

Autostop resizes the group to 0, as a slice's hosts do (workload/spend/autostop.py): deleting the VM would be
repaired. `refresh: always` (Pulumi.yaml) reads that 0 back, and the next `pulumi up` sets the size to 1 again.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.config.settings import Settings
from infra.resources import group, vm_status
from infra.resources.disk import DEVICE_NAME
from infra.resources.vm import metadata
from workload.core.config import ConfigError, set_hint

ONE = 1
ON_FAILURE = "REPAIR"  # the group recreates a preempted, failed or deleted VM (the API's default, said outright)
KEEP_DISK = "NEVER"  # the stateful disk outlives every VM of the group, and the group itself
# A changed template reaches the running VM: metadata (SSH keys, autostop's settings, the startup script for the next
# boot) without a restart, anything else by recreating it with its name and data disk. One VM: none added beside it
# (its disk is read-write to one VM, and its name is one), and it may be unavailable while it is recreated.
UPDATE_TYPE = "PROACTIVE"
MINIMAL_ACTION = "REFRESH"
MOST_DISRUPTIVE_ACTION = "REPLACE"
REPLACEMENT_METHOD = "RECREATE"  # keeps the name: "stateful MIGs" require it for updates that replace


def refuse_while_the_plain_vm_holds_the_disk(s: Settings) -> None:
    """The move of an existing stack into its group: the plain VM, named as the stack, holds the data disk read-write,
    which the group's VM (another name) cannot attach while it exists, and the engine deletes a resource that left the
    program only after it created the new ones, so the group would never become stable. Refused before anything, with
    the order that works: the VM deleted first (the data disk and the bucket stay), then `pulumi up`."""
    found = vm_status.vm_now(s)
    if found is None:
        return
    refused = ConfigError(
        "tpu-sft:recovery",
        f"auto moves the VM into a managed instance group, but VM {s.instance_name} ({found.current_status}) still "
        f"holds the data disk, which the group's VM {group.host_names(group.base_instance_name(s), ONE)[0]} must "
        "attach",
        f"once no run needs it, gcloud compute instances delete {s.instance_name} --zone {s.zone} --project "
        f"{s.project} (the data disk and the bucket stay), then pulumi up; or {set_hint('recovery', 'off')}",
    )
    raise pulumi.RunError(str(refused))


@dataclass(frozen=True)
class TpuVmGroupArgs:
    settings: Settings
    data_disk_name: pulumi.Input[str]
    network_tag: str
    compute_api: pulumi.Resource | None = None


class TpuVmGroup(pulumi.ComponentResource):
    def __init__(self, name: str, args: TpuVmGroupArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-sft:infra:TpuVmGroup", name, None, opts)
        s = args.settings
        refuse_while_the_plain_vm_holds_the_disk(s)
        self.template = group.instance_template(
            name,
            s,
            machine_type=s.accelerator.machine_type,
            network_tag=args.network_tag,
            metadata={**metadata(s), **group.autostop_metadata(s, ONE)},
            extra_disks=[
                gcp.compute.InstanceTemplateDiskArgs(
                    source=args.data_disk_name, device_name=DEVICE_NAME, mode="READ_WRITE", auto_delete=False
                )
            ],
            parent=self,
        )
        self.group = gcp.compute.InstanceGroupManager(
            name,
            name=s.instance_name,
            zone=s.zone,
            description="tpu-sft: one TPU VM, recreated with its name and data disk after a preemption or deletion",
            base_instance_name=group.base_instance_name(s),
            versions=[gcp.compute.InstanceGroupManagerVersionArgs(instance_template=self.template.self_link_unique)],
            target_size=ONE,
            stateful_disks=[
                gcp.compute.InstanceGroupManagerStatefulDiskArgs(device_name=DEVICE_NAME, delete_rule=KEEP_DISK)
            ],
            instance_lifecycle_policy=gcp.compute.InstanceGroupManagerInstanceLifecyclePolicyArgs(
                default_action_on_failure=ON_FAILURE
            ),
            update_policy=gcp.compute.InstanceGroupManagerUpdatePolicyArgs(
                type=UPDATE_TYPE,
                minimal_action=MINIMAL_ACTION,
                most_disruptive_allowed_action=MOST_DISRUPTIVE_ACTION,
                replacement_method=REPLACEMENT_METHOD,
                max_surge_fixed=0,
                max_unavailable_fixed=ONE,
            ),
            # `pulumi up` returns once the VM exists and the group is stable, as it does for the plain VM.
            wait_for_instances=True,
            wait_for_instances_status="STABLE",
            opts=pulumi.ResourceOptions(
                parent=self,
                custom_timeouts=pulumi.CustomTimeouts(
                    create=group.GROUP_TIMEOUT, update=group.GROUP_TIMEOUT, delete=group.GROUP_TIMEOUT
                ),
            ),
        )
        self.name: pulumi.Output[str] = self.group.base_instance_name.apply(lambda base: group.host_names(base, ONE)[0])
        self.group_name = self.group.name
        # Read from Compute Engine once the group is stable, on every preview and `up`: a VM the group recreated keeps
        # its name and gets a new id, which re-runs the phases that must run on it and lets its new host key in.
        found = pulumi.Output.all(self.group.instance_group_manager_id, self.name).apply(
            lambda a: group.hosts_now([a[1]], s)[a[1]]
        )
        self.instance_id: pulumi.Output[str] = found.apply(lambda host: host.instance_id)
        self.external_ip: pulumi.Output[str | None] = found.apply(lambda host: host.external_ip)
        self.service_account_email = group.service_account_email(s, args.compute_api)
        self.register_outputs({"name": self.name, "group": self.group_name})
