"""What `pulumi up` (Pulumi.yaml: `refresh: always`) does to the declared VM as Compute Engine reports it, for the one
field that decides it, `desiredStatus`, played against the GCE stand-in (tests/workload/gce_standin.py) as the sources
say each part behaves (read 2026-12; infra/resources/vm_status.py names them):

- refresh: the provider's Read GETs the instance and, where the state holds a `desired_status`, sets it to the
  instance's status (terraform-provider-google, google/services/compute/resource_compute_instance.go,
  resourceComputeInstanceRead: `if d.Get("desired_status") != "" { d.Set("desired_status", instance.Status) }`);
  the bridge refreshes the state's inputs the same way (pulumi-terraform-bridge, ExtractInputsFromOutputs: on a
  refresh, the inputs already present);
- the step: the declared inputs against the refreshed state. A changed property that one of the resource's
  `replace_on_changes` paths contains makes the step a replacement, whatever the change, else it is an update
  (pulumi/pulumi, pkg/resource/deploy/step_generator.go, applyReplaceOnChanges);
- an update whose `desired_status` goes to RUNNING makes the provider start the instance
  (resourceComputeInstanceUpdate: `startInstanceOperation`, its error wrapped as "Error starting instance: …"); one
  that drops it calls nothing (`if desiredStatus != ""`);
- a replacement with delete_before_replace deletes the old instance first, then creates the new one.

The program's own read of the VM (getInstance, after the refresh) is the mock engine's answer: a test gives it the
stand-in's status. Not modelled: every other property (the mock engine records inputs, not state), the bridge's own
diff, and the creation itself: after the DELETE the stand-in's instance stands for the new VM, RUNNING.
"""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from dataclasses import dataclass

from rehearsal.engine import Declared
from tests.workload.gce_standin import OWNER_TOKEN, GceStandin

STATUS = "desiredStatus"


class ProviderError(RuntimeError):
    """What `pulumi up` would print for the VM's step, had the provider's call failed."""


@dataclass(frozen=True)
class Step:
    op: str  # "same", "update" or "replace"
    refreshed: str | None  # the state's desiredStatus after the refresh (None: the state holds none)
    after: str | None  # the state's desiredStatus after the step: the next `pulumi up`'s `prior`


def _call(standin: GceStandin, method: str, suffix: str = "") -> dict:
    url = (
        f"http://{standin.host}/compute/v1/projects/{standin.project}/zones/{standin.zone}/instances/{standin.instance}"
    )
    request = urllib.request.Request(url + suffix, method=method, headers={"Authorization": f"Bearer {OWNER_TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def refresh(prior: str | None, standin: GceStandin) -> str | None:
    """The state's desiredStatus after the provider's Read: the instance's status, where the state held one."""
    status = str(_call(standin, "GET")["status"])
    return status if prior else prior


def plan(vm: Declared, prior: str | None, standin: GceStandin) -> Step:
    refreshed = refresh(prior, standin)
    declared = vm.inputs.get(STATUS)
    if declared == refreshed:
        return Step("same", refreshed, refreshed)
    # A replace_on_changes path contains the changed top-level property only when it is that property.
    return Step("replace" if STATUS in vm.replace_on_changes else "update", refreshed, declared)


def up(vm: Declared, prior: str | None, standin: GceStandin) -> Step:
    """The VM's step of one `pulumi up` from a state holding `prior`, carried out against the stand-in;
    ProviderError where Google refuses."""
    step = plan(vm, prior, standin)
    doing = "starting" if step.op == "update" else "deleting"
    try:
        if step.op == "update" and vm.inputs.get(STATUS) == "RUNNING":
            _call(standin, "POST", "/start")
        elif step.op == "replace":
            assert vm.delete_before_replace, "a VM holding the data disk read-write must go before its successor"
            _call(standin, "DELETE")
            standin.status = "RUNNING"  # the new VM, of the same name
    except urllib.error.HTTPError as error:
        message = json.load(error)["error"]["message"]
        raise ProviderError(f"Error {doing} instance: googleapi: Error {error.code}: {message}") from None
    return step
