"""A VM with the stack's name that Compute Engine made outside the stack's state: a flex-start request filled after
`pulumi up` had given up waiting (infra/resources/flex_start.py `CREATE_TIMEOUT` says why the provider gives up and
drops the id). Its next create would fail with Google's "already exists" while the VM bills on; instead the program
looks the name up (pulumi-gcp's `getInstance`) while it is evaluated, before the VM is declared, and declares the VM
with `import` of what it found. The engine imports only a resource that is not in the state or is there under
another id (pulumi/pulumi pkg/resource/deploy/step_generator.go: `isImport := goal.Custom && goal.ID != "" &&
(!hasOld || old.External || oldImportID != goal.ID)`), so the stack's own VM is left as it is, and a VM outside the
state is taken in (`pulumi up` shows it as imported) and runs the phases instead of billing beside a second request.

Where the VM found is not in the state, the program says so in one warning, which stays in `pulumi up`'s final output
(a diagnostic, unlike a status message), with the command that deletes it instead. Whether it is in the state is
read from the state itself: the engine's builtin `pulumi:pulumi:readStackResourceOutputs` answers every resource of a
stack, by URN, with its type and outputs, "from the latest stack snapshot, which may include ongoing updates"
(pulumi/pulumi pkg/resource/deploy/builtins.go and the backend client's `GetStackResourceOutputs`); named by this
stack, that is the state this update started from, refreshed (Pulumi.yaml `refresh: always`). The warning is logged
as the program declares the VM, before the VM and everything that needs it are registered.
"""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_gcp as gcp

from infra.config.settings import Settings
from infra.resources import flex_start

INSTANCE = "gcp:compute/instance:Instance"
READ_STATE = "pulumi:pulumi:readStackResourceOutputs"  # the engine's builtin, answered from the stack's snapshot


def options(s: Settings, found: gcp.compute.GetInstanceResult | None) -> pulumi.ResourceOptions | None:
    """The VM's resource options for this: its create timeout and, where Compute Engine has a VM of its name
    (`found`, infra/resources/vm_status.py `vm_now`), `import_` of its provider id, which the engine ignores for the
    VM already in the state. None for a stack that is not flex-start: its create waits no longer than the provider
    does."""
    if not flex_start.takes_no_reservation(s):
        return None
    if found is not None and not in_state(found.id):
        pulumi.log.warn(taken_in(s))
    return pulumi.ResourceOptions(
        custom_timeouts=pulumi.CustomTimeouts(create=flex_start.CREATE_TIMEOUT),
        import_=None if found is None else found.id,
    )


def in_state(provider_id: str) -> bool:
    """Whether this stack's state holds a VM of this provider id, as the engine compares it when it decides on an
    import (the bridged provider's outputs carry the id)."""
    try:
        resources = stack_resources()
    except Exception as error:  # the invoke's failure, whose type the SDK does not export
        # Unproven against a real backend here (only the mock engine answers it): where it does not answer, the VM
        # is still taken in, without the warning, rather than failing every `pulumi up` of a flex-start stack.
        pulumi.log.debug(f"{READ_STATE} did not answer ({error}); the VM found is imported without a warning")
        return True
    return any(r["type"] == INSTANCE and r["outputs"].get("id") == provider_id for r in resources.values())


def stack_resources() -> dict[str, Any]:
    """Every resource of this stack's state, by URN, with its type and outputs (READ_STATE); raises where the engine
    does not answer."""
    stack = f"{pulumi.get_organization()}/{pulumi.get_project()}/{pulumi.get_stack()}"
    return pulumi.runtime.invoke(READ_STATE, {"stackName": stack}).value["outputs"]


def taken_in(s: Settings) -> str:
    """The one line for a VM found outside the state: what it is, what this run does with it, and the other choice."""
    return (
        f"the VM {s.instance_name} in {s.zone} is running outside this stack: Compute Engine filled its flex-start "
        "request after an earlier `pulumi up` gave up waiting; this update takes it in (import) and trains on it. "
        "To delete it instead, decline the update and run: "
        f"gcloud compute instances delete {s.instance_name} --zone {s.zone} --project {s.project} --quiet"
    )
