"""A multi-host TPU slice (tpu-sft:acceleratorType v6e-16 … v6e-256), declared as Google recommends on Compute
Engine: a managed instance group (MIG) of `ct6e-standard-4t` hosts made from one instance template, whose
workload policy (a resource policy of type HIGH_THROUGHPUT with the slice's `accelerator_topology`) makes the
hosts one ICI-connected slice (cloud.google.com/compute/docs/tpus/create-tpu-mig-multi-host-slice).

Each host is the single VM of infra/resources/vm.py in every fact it can be: image, boot disk, network and tag, service
account, scheduling (provisioning model, termination, run cap), reservation affinity, labels and metadata
(ssh-keys, the startup script, autostop's and the bill's settings). What differs: the machine type, no data disk
(the hosts cannot share one read-write disk; a slice's startup script mounts none), and the MIG around them. The
template, the hosts' names and the read of their ids are the MIG's own (infra/resources/group.py), shared with the
single VM's group of one.

With FLEX_START the group starts empty and the first task resizes it to the slice's hosts
(remote/pipeline/capacity.py; infra/resources/flex_start.py says what is read and what is inferred).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_gcp as gcp

from infra.config.settings import Settings
from infra.resources import flex_start, group
from infra.resources.bucket import region_of
from infra.resources.vm import metadata
from remote.pipeline.capacity import group_path

WORKLOAD_POLICY_TYPE = "HIGH_THROUGHPUT"  # collocated hosts; the only type that takes an accelerator topology
# A host Google ended (preempted, capped by max_run_duration, reservation over) stays ended: the default, REPAIR,
# would recreate it and keep billing, which a run cap must not allow.
ON_FAILURE = "DO_NOTHING"
# A template change never replaces hosts one by one under a running slice (PROACTIVE, the API's default, would
# roll them): it reaches the hosts when the MIG recreates them.
UPDATE_TYPE = "OPPORTUNISTIC"
BULK = "BULK"  # the group makes its hosts all at once or none (target size policy)


@dataclass(frozen=True)
class TpuSliceArgs:
    settings: Settings
    network_tag: str
    # What the default service account's look-up waits for (an invoke takes no stack transformation:
    # infra/resources/apis.py).
    compute_api: pulumi.Resource | None = None


class TpuSlice(pulumi.ComponentResource):
    def __init__(self, name: str, args: TpuSliceArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-sft:infra:TpuSlice", name, None, opts)
        s = args.settings
        accelerator = s.accelerator
        child = pulumi.ResourceOptions(parent=self)
        # Neither the policy nor the template is named: both are immutable, so a change creates a new one
        # (an auto-named one, beside the old) before the MIG moves to it and the old one is deleted.
        self.workload_policy = gcp.compute.ResourcePolicy(
            f"{name}-workload",
            region=region_of(s.zone).lower(),
            description=f"tpu-sft: the {accelerator.name} slice's hosts as one {accelerator.topology} topology",
            workload_policy=gcp.compute.ResourcePolicyWorkloadPolicyArgs(
                type=WORKLOAD_POLICY_TYPE, accelerator_topology=accelerator.topology
            ),
            opts=child,
        )
        self.template = group.instance_template(
            name,
            s,
            machine_type=accelerator.machine_type,
            network_tag=args.network_tag,
            metadata={**metadata(s, data_disk=False), **group.autostop_metadata(s, accelerator.hosts)},
            extra_disks=[],  # none: the hosts cannot share one read-write disk
            parent=self,
        )
        flex = flex_start.is_flex_start(s)
        self.group = gcp.compute.InstanceGroupManager(
            name,
            name=s.instance_name,
            zone=s.zone,
            description=flex_start.group_description(s),
            base_instance_name=group.base_instance_name(s),  # hosts <instanceName>-01, -02, …
            versions=[gcp.compute.InstanceGroupManagerVersionArgs(instance_template=self.template.self_link_unique)],
            target_size=flex_start.EMPTY_GROUP if flex else accelerator.hosts,
            # Compute Engine refuses a group with a TPU accelerator topology that does not create its hosts all at
            # once (rehearsal/group_rules.py says where that rule comes from), and a group's mode cannot change. A
            # BULK group waits until it can make every host of its target size, so a flex-start slice's wait for
            # capacity is the group's own.
            target_size_policies=[gcp.compute.InstanceGroupManagerTargetSizePolicyArgs(mode=BULK)],
            resource_policies=gcp.compute.InstanceGroupManagerResourcePoliciesArgs(
                workload_policy=self.workload_policy.self_link
            ),
            instance_lifecycle_policy=gcp.compute.InstanceGroupManagerInstanceLifecyclePolicyArgs(
                default_action_on_failure=ON_FAILURE
            ),
            update_policy=gcp.compute.InstanceGroupManagerUpdatePolicyArgs(type=UPDATE_TYPE, minimal_action="REPLACE"),
            # `pulumi up` returns once every host exists and the group is stable, as it does for the single VM. A
            # flex-start group is not waited for: it is empty when created, and its first task fills it and waits
            # for the capacity, with a line every 30 s (remote/pipeline/capacity.py), where the provider would wait
            # silently until its timeout.
            wait_for_instances=not flex,
            wait_for_instances_status=None if flex else "STABLE",
            opts=pulumi.ResourceOptions(
                parent=self,
                custom_timeouts=pulumi.CustomTimeouts(
                    create=group.GROUP_TIMEOUT, update=group.GROUP_TIMEOUT, delete=group.GROUP_TIMEOUT
                ),
                # The first task raises the target size; a refresh reads it back, and setting it back to 0 would
                # delete the hosts.
                ignore_changes=["targetSize"] if flex else None,
                # Flex-start switched on or off, or another run cap (infra/resources/flex_start.py group_description):
                # the group is made anew, the old one (its hosts) deleted first, as its name is the same. So is a new
                # workload policy (another acceleratorType: another topology, another auto-named
                # policy): Compute Engine refuses to patch one onto a group that has hosts ("Workload policy update
                # is not allowed when the MIG has instances.", terraform-provider-google's acceptance test
                # TestAccInstanceGroupManager_addingResourcePoliciesToMigWithNonZeroTargetSize_fails), and the
                # provider patches it in place unless the policy is removed.
                replace_on_changes=["description", "resourcePolicies.workloadPolicy", "targetSizePolicies"],
                delete_before_replace=True,
            ),
        )
        self.name = self.group.name
        self.hosts = accelerator.hosts
        # Read from what the group was given (a flex-start group: the size its first task resizes it to), so the
        # tasks reach exactly the hosts it names.
        host_count = pulumi.Output.from_input(accelerator.hosts) if flex else self.group.target_size
        self.host_names: pulumi.Output[list[str]] = pulumi.Output.all(self.group.base_instance_name, host_count).apply(
            lambda a: group.host_names(a[0], int(a[1]))
        )
        # What the tasks wait for: the group, whose hosts they reach (the host names, read from it, tie them to it as
        # well; this says so where the tasks are wired).
        self.ready: list[pulumi.Resource] = [self.group]
        # Server-assigned, new when the group is replaced: what the tasks' host keys are pinned to.
        self.group_id: pulumi.Output[str] = self.group.instance_group_manager_id.apply(str)
        # Each host's instance id, read from Compute Engine on every preview and `up`, once the group's outputs are
        # known (in `up`: once it is created or updated and stable): a host the group recreated keeps its name and
        # gets a new id, the evidence that lets its new host key in (remote/ssh/host_ids.py). A flex-start group's
        # hosts are made by its first task, after these would be read, so they are not: their ids would change from
        # "none yet" to the hosts' on the next `pulumi up` and re-run every phase for nothing.
        self.host_ids: pulumi.Output[dict[str, str]] = (
            pulumi.Output.from_input({})
            if flex
            else pulumi.Output.all(self.group_id, self.host_names).apply(
                lambda a: {name: host.instance_id for name, host in group.hosts_now(a[1], s).items()}
            )
        )
        # The group a flex-start slice's first task fills (remote/pipeline/capacity.py).
        self.flex_start_group: pulumi.Output[str | None] = (
            self.group.name.apply(lambda named: group_path(s.project, s.zone, named))
            if flex
            else pulumi.Output.from_input(None)
        )
        # What the tasks' triggers hold: a new group, or a new host in it, is new hosts, and every phase re-runs.
        self.identity: pulumi.Output[str] = pulumi.Output.all(self.group_id, self.host_ids).apply(
            lambda a: "/".join([a[0], *(a[1][name] for name in sorted(a[1]))])
        )
        self.service_account_email = group.service_account_email(s, args.compute_api)
        self.register_outputs({"name": self.name, "hosts": self.hosts, "hostNames": self.host_names})
