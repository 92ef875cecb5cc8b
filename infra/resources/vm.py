"""The TPU VM, declared exactly as the seed's `gcloud compute instances create`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_gcp as gcp

from infra.config.settings import IMAGE, Settings
from infra.config.ssh_key_trust import ssh_metadata
from infra.resources import flex_start, vm_outside_state, vm_status
from infra.resources.disk import DEVICE_NAME
from infra.resources.startup import metadata as autostop_metadata
from infra.resources.startup import startup_script
from workload.core.contract import PRICE_KEY

RESERVATION_KEY = "compute.googleapis.com/reservation-name"
BOOT_DISK_TYPE = "hyperdisk-balanced"  # v6e supports Hyperdisk only; left unset, the API may pick another type
# The workload's Google APIs (Cloud Storage, logging) are then governed by the service account's IAM roles alone,
# as Google recommends; the seed's `gcloud compute instances create` attaches the default compute account too.
SERVICE_ACCOUNT_SCOPES = ("https://www.googleapis.com/auth/cloud-platform",)


@dataclass(frozen=True)
class TpuVmArgs:
    settings: Settings
    data_disk_self_link: pulumi.Input[str]
    network_tag: str


def scheduling_fields(s: Settings) -> dict[str, Any]:
    """The scheduling a TPU host gets, one VM or each host of a slice (infra/resources/slice.py), less the run cap."""
    model = s.provisioning_model
    return dict(
        provisioning_model=model,
        on_host_maintenance="TERMINATE",
        # Only non-STANDARD VMs (and capped ones) are ended by Google; DELETE leaves nothing billable behind.
        instance_termination_action="DELETE" if model != "STANDARD" or s.max_run_hours else None,
        automatic_restart=False if model in ("SPOT", "FLEX_START") else None,
        preemptible=True if model == "SPOT" else None,
    )


def scheduling(s: Settings) -> gcp.compute.InstanceSchedulingArgs:
    return gcp.compute.InstanceSchedulingArgs(
        **scheduling_fields(s),
        max_run_duration=(
            gcp.compute.InstanceSchedulingMaxRunDurationArgs(seconds=s.max_run_hours * 3600)
            if s.max_run_hours
            else None
        ),
    )


def reservation_affinity(s: Settings) -> gcp.compute.InstanceReservationAffinityArgs | None:
    """RESERVATION_BOUND (a calendar-mode reservation) or STANDARD (an ordinary one) with tpu-sft:reservation; none
    for FLEX_START, as a slice's flex-start hosts (infra/resources/flex_start.py `takes_no_reservation`)."""
    if flex_start.takes_no_reservation(s):
        return gcp.compute.InstanceReservationAffinityArgs(type=flex_start.NO_RESERVATION)
    if not s.reservation:
        return None
    return gcp.compute.InstanceReservationAffinityArgs(
        type="SPECIFIC_RESERVATION",
        specific_reservation=gcp.compute.InstanceReservationAffinitySpecificReservationArgs(
            key=RESERVATION_KEY, values=[s.reservation or ""]
        ),
    )


def metadata(s: Settings, *, data_disk: bool = True) -> dict[str, str]:
    """What a TPU host knows of the stack: who may log in, its startup script, autostop's and the bill's settings."""
    return {
        # Metadata keys, unlike metadata_startup_script, change without replacing the VM.
        **ssh_metadata(s.ssh_access, s.ssh_user, s.ssh_public_key),
        "startup-script": startup_script(s, data_disk=data_disk),
        **autostop_metadata(s),
        PRICE_KEY: str(s.tpu_price.usd_per_chip_hour),  # the VM's own bill so far (workload/spend/bill.py)
    }


# The Instance fields pulumi-gcp updates only on a stopped VM (terraform-provider-google's instance Update: "Changing
# the machine_type, min_cpu_platform, service_account, … or network_interface.[#d].(network/subnetwork/
# subnetwork_project) … on a started instance requires stopping it"), as far as this program sets them.
STOP_TO_UPDATE = (
    "machineType",
    "serviceAccount",
    "networkInterfaces[*].network",
    "networkInterfaces[*].subnetwork",
)


class TpuVm(pulumi.ComponentResource):
    def __init__(self, name: str, args: TpuVmArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("tpu-sft:infra:TpuVm", name, None, opts)
        s = args.settings
        # Declared only for a VM found stopped for good, which this update then replaces (its change is in
        # `replace_on_changes`); never while Google is restarting it (infra/resources/vm_status.py).
        found = vm_status.vm_now(s)
        status = vm_status.declared_status(None if found is None else found.current_status)
        self.instance = gcp.compute.Instance(
            name,
            name=s.instance_name,
            zone=s.zone,
            machine_type=s.accelerator.machine_type,
            tags=[args.network_tag],
            labels=dict(s.labels),
            boot_disk=gcp.compute.InstanceBootDiskArgs(
                auto_delete=True,
                # No labels here: every boot_disk field is ForceNew, so a label edit would replace the VM.
                initialize_params=gcp.compute.InstanceBootDiskInitializeParamsArgs(
                    image=IMAGE, size=s.boot_disk_size_gb, type=BOOT_DISK_TYPE
                ),
            ),
            attached_disks=[
                gcp.compute.InstanceAttachedDiskArgs(
                    source=args.data_disk_self_link, device_name=DEVICE_NAME, mode="READ_WRITE"
                )
            ],
            network_interfaces=[
                gcp.compute.InstanceNetworkInterfaceArgs(
                    network=s.network,
                    subnetwork=s.subnetwork,
                    access_configs=[gcp.compute.InstanceNetworkInterfaceAccessConfigArgs()] if s.external_ip else [],
                )
            ],
            service_account=gcp.compute.InstanceServiceAccountArgs(
                email=s.service_account, scopes=list(SERVICE_ACCOUNT_SCOPES)
            ),
            scheduling=scheduling(s),
            reservation_affinity=reservation_affinity(s),
            metadata=metadata(s),
            desired_status=status,
            # The provider applies these changes by stopping the VM, updating it and starting it again, which a TPU
            # VM does not survive (docs/checkpoints.md: a person cannot start a stopped TPU VM). They replace it
            # instead: the old one deleted first (its name, and the data disk it holds read-write, are the new
            # one's), the data disk and the bucket kept, and every phase re-runs on the new VM (infra/plan/reruns.py).
            # A flex-start VM waits as long as Google holds its request, and one Google made after an earlier `pulumi
            # up` gave up is taken into the state (infra/resources/vm_outside_state.py).
            opts=pulumi.ResourceOptions.merge(
                pulumi.ResourceOptions(
                    parent=self,
                    replace_on_changes=[*STOP_TO_UPDATE, *([vm_status.REPLACED_WHEN_STOPPED] if status else [])],
                    delete_before_replace=True,
                ),
                vm_outside_state.options(s, found),
            ),
        )
        self.name = self.instance.name
        self.instance_id = self.instance.instance_id
        self.external_ip = self.instance.network_interfaces.apply(_external_ip)
        self.service_account_email = self.instance.service_account.apply(_service_account_email)
        self.register_outputs({"name": self.name, "instance_id": self.instance_id})


def _external_ip(interfaces) -> str | None:
    configs = interfaces[0].access_configs if interfaces else None
    return configs[0].nat_ip if configs else None


def _service_account_email(account) -> str:
    """The VM's service account: the one named, or the default compute account the API attaches when none is."""
    if account is None or not account.email:
        raise ValueError("the VM reports no service account, which autostop needs: set tpu-sft:serviceAccount")
    return account.email
