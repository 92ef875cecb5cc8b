"""A VM with the stack's name that Compute Engine made outside the stack's state: a flex-start request filled after
`pulumi up` had given up waiting (infra/resources/flex_start.py `CREATE_TIMEOUT` says why the provider gives up and
drops the id). Its next create would fail with Google's "already exists" while the VM bills on; instead the program
looks the name up (pulumi-gcp's `getInstance`) while it is evaluated, before the VM is declared, and declares the VM
with `import` of what it found. The engine imports only a resource that is not in the state or is there under
another id (pulumi/pulumi pkg/resource/deploy/step_generator.go: `isImport := goal.Custom && goal.ID != "" &&
(!hasOld || old.External || oldImportID != goal.ID)`), so the stack's own VM is left as it is, and a VM outside the
state is taken in (`pulumi up` shows it as imported) and runs the phases instead of billing beside a second request.
"""

from __future__ import annotations

import pulumi
import pulumi_gcp as gcp

from infra.config.settings import Settings
from infra.resources import flex_start


def options(s: Settings, found: gcp.compute.GetInstanceResult | None) -> pulumi.ResourceOptions | None:
    """The VM's resource options for this: its create timeout and, where Compute Engine has a VM of its name
    (`found`, infra/resources/vm_status.py `vm_now`), `import_` of its provider id. None for a stack that is not
    flex-start: its create waits no longer than the provider does."""
    if not flex_start.takes_no_reservation(s):
        return None
    return pulumi.ResourceOptions(
        custom_timeouts=pulumi.CustomTimeouts(create=flex_start.CREATE_TIMEOUT),
        import_=None if found is None else found.id,
    )
