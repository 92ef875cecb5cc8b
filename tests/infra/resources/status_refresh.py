"""What `pulumi up` (Pulumi.yaml: `refresh: always`) does to the declared VM once Compute Engine says it is stopped,
for the one field that decides it, `desiredStatus`, played against the GCE stand-in (tests/workload/gce_standin.py)
as the sources say each part behaves:

- refresh: the provider's Read GETs the instance and, where the program declares `desired_status`, sets it to the
  instance's status (terraform-provider-google, google/services/compute/resource_compute_instance.go,
  resourceComputeInstanceRead: `if d.Get("desired_status") != "" { d.Set("desired_status", instance.Status) }`;
  read 2026-12-05 at commit 0047466c);
- the step: the declared inputs against the refreshed state. A changed property that one of the resource's
  `replace_on_changes` paths contains makes the step a replacement, else it is an update (pulumi/pulumi,
  pkg/resource/deploy/step_generator.go, applyReplaceOnChanges);
- an update whose `desired_status` goes back to RUNNING makes the provider start the instance
  (resourceComputeInstanceUpdate: `startInstanceOperation`, its error wrapped as "Error starting instance: …");
- a replacement with delete_before_replace deletes the old instance first, then creates the new one.

Not modelled: every other property (the mock engine records inputs, not state), the bridge's own diff, and the
creation itself: after the DELETE the stand-in's instance stands for the new VM, RUNNING.
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
    refreshed: str | None  # the state's desiredStatus after the refresh


def _call(standin: GceStandin, method: str, suffix: str = "") -> dict:
    url = (
        f"http://{standin.host}/compute/v1/projects/{standin.project}/zones/{standin.zone}/instances/{standin.instance}"
    )
    request = urllib.request.Request(url + suffix, method=method, headers={"Authorization": f"Bearer {OWNER_TOKEN}"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.load(response)


def refresh(vm: Declared, standin: GceStandin) -> str | None:
    """The state's desiredStatus after the provider's Read: the instance's status, where the program declares one."""
    if not vm.inputs.get(STATUS):
        return None
    return str(_call(standin, "GET")["status"])


def plan(vm: Declared, standin: GceStandin) -> Step:
    refreshed = refresh(vm, standin)
    if refreshed == vm.inputs.get(STATUS):
        return Step("same", refreshed)
    # A replace_on_changes path contains the changed top-level property only when it is that property.
    return Step("replace" if STATUS in vm.replace_on_changes else "update", refreshed)


def up(vm: Declared, standin: GceStandin) -> Step:
    """The VM's step of one `pulumi up`, carried out against the stand-in; ProviderError where Google refuses."""
    step = plan(vm, standin)
    doing = "starting" if step.op == "update" else "deleting"
    try:
        if step.op == "update" and vm.inputs[STATUS] == "RUNNING":
            _call(standin, "POST", "/start")
        elif step.op == "replace":
            assert vm.delete_before_replace, "a VM holding the data disk read-write must go before its successor"
            _call(standin, "DELETE")
            standin.status = "RUNNING"  # the new VM, of the same name
    except urllib.error.HTTPError as error:
        message = json.load(error)["error"]["message"]
        raise ProviderError(f"Error {doing} instance: googleapi: Error {error.code}: {message}") from None
    return step
