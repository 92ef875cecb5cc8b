"""Whether this `pulumi up` replaces the stack's VM: only when Compute Engine says it is stopped for good
(workload/core/instance_status.py), never while Google is restarting it.

How the engine and the provider decide (read 2026-12 in their sources; docs/checkpoints.md, "A stopped VM"):
- the refresh (Pulumi.yaml `refresh: always`) runs the provider's Read, which copies the instance's status into
  `desired_status` whenever the state holds one (terraform-provider-google, resource_compute_instance.go,
  resourceComputeInstanceRead: `if d.Get("desired_status") != "" { d.Set("desired_status", instance.Status) }`);
  the bridge carries it into the state's inputs too (pulumi-terraform-bridge `ExtractInputsFromOutputs`, on a
  refresh: the inputs already present);
- a changed input named in `replace_on_changes` makes the step a replacement (pulumi/pulumi step_generator.go,
  `applyReplaceOnChanges`), whatever the new value, so a status read mid-restart (STOPPING, PROVISIONING, …) was
  one too;
- `ignore_changes` cannot hold it back: the engine puts the old input back before the provider's Check
  (`processIgnoreChanges`), and the Check validates `desired_status` as one of RUNNING, TERMINATED, SUSPENDED
  (the schema's `ValidateFunc`), so a refreshed STOPPING would fail the `pulumi up`;
- an update to an absent `desired_status` calls nothing (resourceComputeInstanceUpdate: `if desiredStatus != ""`),
  and one back to RUNNING starts the instance, which Google refuses for a TPU VM.

So the program declares `desired_status` only when it finds the VM at rest: it reads the VM itself
(`compute.instances.get`, pulumi-gcp's getInstance) as it runs, after the refresh. Otherwise the state holds none,
no refresh writes one, and no status can change the VM's step. Where it declares one, and names it in
`replace_on_changes`, the state's differs (none, or the status at rest) and the VM is replaced, its data disk kept.
Only then is it named: the first `pulumi up` after a replacement, or after this change, drops the declared RUNNING
from the state as an update that calls nothing, not a replacement.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.config.settings import Settings
from workload.core.instance_status import stopped_for_good

DECLARED_WHEN_STOPPED = "RUNNING"  # what a VM stopped for good is declared: its successor is created running
REPLACED_WHEN_STOPPED = "desiredStatus"  # the input whose change replaces it (`replace_on_changes`)
# What getInstance answers where there is no VM to read: a 404 (terraform-provider-google
# HandleDataSourceNotFoundError: "<the instance> not found"), and an empty project's Compute Engine API, which the
# stack enables itself (infra/resources/apis.py): Google's 403 "<API> has not been used in project <P> before or it
# is disabled" (rehearsal/project_apis.py quotes its sources, field reports).
NO_VM = ("not found", "has not been used in project")


def vm_now(s: Settings, name: str | None = None) -> gcp.compute.GetInstanceResult | None:
    """Compute Engine's record of the VM named as the stack's (or `name`, a group's host), read once as the program
    runs (its status here, its id in infra/resources/vm_outside_state.py); None where there is no VM."""
    try:
        return gcp.compute.get_instance(name=name or s.instance_name, zone=s.zone, project=s.project)
    except Exception as error:  # the invoke's failure, whose type the SDK does not export
        if any(said in str(error) for said in NO_VM):
            return None
        raise


def declared_status(status: str | None) -> str | None:
    """The `desired_status` to declare for a VM found in `status`: RUNNING only for one stopped for good."""
    if status is not None and stopped_for_good(status):
        pulumi.log.warn(
            f"the VM is {status}, stopped for good (a person cannot start a TPU VM again): this update replaces it "
            "with a new one on the same data disk, and the run resumes from its checkpoints"
        )
        return DECLARED_WHEN_STOPPED
    return None
