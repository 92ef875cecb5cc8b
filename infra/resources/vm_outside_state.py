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


def found(s: Settings) -> str | None:
    """The provider's id of the VM named as the stack's, where Compute Engine has one; None where it has none, the
    stack is not flex-start (its create waits no longer than the provider does), or Compute Engine cannot be asked yet
    (its API not on in a new project: then no VM of it exists either)."""
    if not flex_start.takes_no_reservation(s) or s.is_slice:
        return None
    try:
        return gcp.compute.get_instance(name=s.instance_name, zone=s.zone, project=s.project).id
    except Exception as error:  # pulumi-gcp raises its API's error: 404 for no VM, 403 for Compute Engine off
        if "not found" in str(error) or "has not been used" in str(error) or "is disabled" in str(error):
            return None
        raise


def options(s: Settings) -> pulumi.ResourceOptions | None:
    """The VM's resource options for this: its create timeout and, where a VM of its name exists, `import_`."""
    if not flex_start.takes_no_reservation(s):
        return None
    return pulumi.ResourceOptions(
        custom_timeouts=pulumi.CustomTimeouts(create=flex_start.CREATE_TIMEOUT), import_=found(s)
    )
