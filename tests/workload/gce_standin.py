"""A local stand-in for the two Google endpoints a VM's autostop talks to: the metadata server and the Compute
Engine API's instances.delete (and instances.stop, which it refuses for a TPU VM as Google does) and, for a slice's
host, instanceGroupManagers.resize; and for the account that runs `pulumi up` (the provider), instances.get and
instances.start, which it refuses for a TPU VM as Google does. Neither exists off Google Cloud, so this is a
stand-in, not the real thing: it answers only the paths autostop and the provider use, with the real paths, headers
and JSON shapes, and records every request so a test can check what was asked for.

What the VM may do is what the program declared (`DeclaredAccess.of`, `DeclaredGroupAccess.of`, from the mock
engine's record), evaluated as IAM evaluates it. Rules enforced:
- metadata needs `Metadata-Flavor: Google` (403 without it);
- an API call needs the bearer token the metadata server issued to the VM's service account, or OWNER_TOKEN, the
  credentials of the project's owner who runs `pulumi up`, which may do anything to the instance (401 without either);
- `GET …/instances/I` (`compute.instances.get`) answers the instance's name, machine type and `status` (the field
  a test sets: RUNNING, TERMINATED, …), as the provider's Read on every refresh reads it;
- `POST …/instances/I/stop` needs `compute.instances.stop`, `DELETE …/instances/I` needs `compute.instances.delete`,
  granted on that very instance: an InstanceIAMMember on I for `serviceAccount:<the VM's account>` whose role is a
  declared custom role holding the permission. Anything else is 403 with Google's "Required '<permission>'
  permission for '<resource>'" message, whether or not the instance exists (Google does not tell a caller
  without the permission which instances exist); with the permission, an instance other than the VM is 404;
- `POST …/instanceGroupManagers/G/resize?size=N` needs `compute.instanceGroupManagers.update` on that group
  (the API reference's words), granted by a project IAMMember for the hosts' account whose role is a declared
  custom role holding it. A condition `resource.name == "…"` is evaluated as Google's list of the attributes'
  resource types says (cloud.google.com/iam/docs/conditions-resource-attributes): for Compute Engine it names images,
  instances and instance templates, so for an instance group manager the name is not recognised and the condition
  grants nothing (403); any other condition raises NotModelled rather than be guessed at. Refused as above (403
  without the grant, 404 for a granted group that does not exist);
- a TPU VM cannot be stopped, only deleted: a stop of a VM whose declared machine type is a `ct6e-*` (every one
  this project declares) is refused with 400 even when the grant allows it. Google's TPU Builders guide: "TPU VMs
  created with FLEX_START or the standard Compute Engine API do not support the stop and restart operations";
  Compute Engine's stop/start page (cloud.google.com/compute/docs/instances/stop-start-instance, as its Italian
  and Traditional-Chinese versions were read) says an instance with TPUs attached cannot be restarted once stopped;
- a FLEX_START VM cannot be stopped either, whatever its machine type (the same guide; the MIG resize-request docs
  say the same of flex-start VMs in a group): its stop is refused with 400 even when the grant allows it;
- a stopped TPU VM cannot be started: `POST …/instances/I/start` (`compute.instances.start`) of a VM whose machine type
  is a `ct6e-*` is refused with 400, whoever asks. Compute Engine's "Stop or restart a Compute Engine instance"
  (docs.cloud.google.com/compute/docs/instances/stop-start-instance), its Limitations, read 2026-12-05 in its
  Italian ("Non puoi riavviare le istanze TPU"), Hebrew and Traditional-Chinese versions (the stored English copy
  ends before that section): TPU instances cannot be restarted; once stopped, one can only be deleted. A start of
  any other machine type makes it RUNNING;
- `GET …/zones/Z/operations?filter=…` (`zoneOperations.list`) answers the preemptions a test records (`preempted`:
  instance name and insertTime), for the one filter Google's sample "List preemption history of a Google Compute
  Engine instance" builds (`operationType="compute.instances.preempted" AND targetLink="…/instances/NAME"`); any other
  filter is NotModelled rather than guessed at. Only the owner's credentials read it (the VM's account has no such
  grant).

Not enforced: predefined roles, and bindings at folder or organization level (the program declares none for
autostop; the stand-in grants nothing through them, which is stricter than Google); IAM conditions other than the
one above, and deny policies; what Google does with an unrecognised attribute beyond not granting (the page does not
say whether the refusal tells why); the exact status and wording of Google's refusal of a TPU VM's or a flex-start
VM's stop, or of a stopped TPU VM's start (not published; 400 and the page's own sentence stand for it), and whether
Google refuses the stop itself or only the start after it (either way a stopped TPU VM never runs again; the program
never asks for a stop, so nothing relies on which);
whether deleting an instance also checks `compute.disks.delete` on its auto-delete boot disk (not settled from a
source reachable here; the data disk is attached without auto-delete, so it is never deleted with the VM);
operations, their polling, and the instance's or group's state afterwards (the VM is not actually deleted, the
group's hosts not deleted: the test tears them down; only a start changes the status instances.get answers).
"""

from __future__ import annotations

import json
import re
import threading
import time
import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from rehearsal.engine import DEFAULT_COMPUTE_ACCOUNT, Stack
from tests.ssh_testbed import wait_until
from tests.standin_http import reply
from workload.spend.autostop import ACTION_KEY

TOKEN = "ya29.standin-access-token-0123456789"
OWNER_TOKEN = "ya29.standin-owner-token-9876543210"  # the project owner's, who runs `pulumi up`: every permission
INSTANCE = "gcp:compute/instance:Instance"
ROLE = "gcp:projects/iAMCustomRole:IAMCustomRole"
BINDING = "gcp:compute/instanceIAMMember:InstanceIAMMember"
PERMISSION = {  # (method, what follows the instance's path) → the permission Google checks
    ("GET", ""): "compute.instances.get",
    ("POST", "/stop"): "compute.instances.stop",
    ("POST", "/start"): "compute.instances.start",
    ("DELETE", ""): "compute.instances.delete",
}
START_REFUSED = (  # the page's own sentence: Google's exact refusal is not published
    "Instance {name} ({machine_type}) has TPUs attached and cannot be restarted: "
    "TPU instances can only be deleted once stopped."
)
TPU_MACHINE_TYPE_PREFIX = "ct6e-"  # v6e, every TPU machine type the program declares (workload/core/accelerators.py)
INSTANCE_PATH = re.compile(r"/compute/v1/projects/([^/]+)/zones/([^/]+)/instances/([^/?]+)")
GROUP = "gcp:compute/instanceGroupManager:InstanceGroupManager"
TEMPLATE = "gcp:compute/instanceTemplate:InstanceTemplate"
PROJECT_MEMBER = "gcp:projects/iAMMember:IAMMember"
GROUP_PERMISSION = "compute.instanceGroupManagers.update"
OPERATIONS_PATH = re.compile(r"/compute/v1/projects/([^/]+)/zones/([^/]+)/operations")
PREEMPTION_FILTER = re.compile(
    r'operationType="compute\.instances\.preempted" AND '
    r'targetLink="https://www\.googleapis\.com/compute/v1/projects/([^/]+)/zones/([^/]+)/instances/([^/"]+)"'
)
RESIZE_PATH = re.compile(r"/compute/v1/projects/([^/]+)/zones/([^/]+)/instanceGroupManagers/([^/?]+)/resize")
NAME_CONDITION = re.compile(r'resource\.name == "([^"]+)"')
# The Compute Engine resource types whose `resource.name` IAM Conditions evaluate, as Google lists them
# (cloud.google.com/iam/docs/conditions-resource-attributes); for others the attribute is not recognised.
NAMED_BY_CONDITIONS = re.compile(r"projects/[^/]+/(global/images|zones/[^/]+/instances|global/instanceTemplates)/[^/]+")


class NotModelled(ValueError):
    """The program declared an IAM condition this stand-in does not evaluate: it refuses to guess."""


def _custom_roles(stack: Stack) -> dict[str, frozenset[str]]:
    return {
        f"projects/{r.inputs['project']}/roles/{r.inputs['roleId']}": frozenset(r.inputs["permissions"])
        for r in stack.of_type(ROLE)
    }


@dataclass(frozen=True)
class DeclaredAccess:
    """The VM and what the program granted on instances, as declared under the mock engine."""

    project: str
    zone: str
    instance: str
    service_account: str
    provisioning_model: str
    machine_type: str
    role_permissions: Mapping[str, frozenset[str]]  # custom role name → its permissions
    bindings: frozenset[tuple[str, str, str, str, str]]  # (project, zone, instance, role, member)

    @classmethod
    def of(cls, stack: Stack, project: str) -> "DeclaredAccess":
        """`project` is the provider's (gcp:project): the Instance itself names none."""
        vm = stack.one(INSTANCE).inputs
        roles = _custom_roles(stack)
        bindings = frozenset(
            (b.inputs["project"], b.inputs["zone"], b.inputs["instanceName"], b.inputs["role"], b.inputs["member"])
            for b in stack.of_type(BINDING)
        )
        return cls(
            project=project,
            zone=vm["zone"],
            instance=vm["name"],
            service_account=vm.get("serviceAccount", {}).get("email", DEFAULT_COMPUTE_ACCOUNT),
            provisioning_model=vm.get("scheduling", {}).get("provisioningModel", "STANDARD"),
            machine_type=vm["machineType"],
            role_permissions=roles,
            bindings=bindings,
        )

    def granted(self, permission: str, project: str, zone: str, instance: str) -> bool:
        member = f"serviceAccount:{self.service_account}"
        return any(
            (p, z, i, m) == (project, zone, instance, member) and permission in self.role_permissions.get(r, ())
            for p, z, i, r, m in self.bindings
        )


@dataclass(frozen=True)
class DeclaredGroupAccess:
    """A slice's group and what the program granted on it, as declared under the mock engine."""

    project: str
    zone: str
    group: str
    service_account: str
    role_permissions: Mapping[str, frozenset[str]]  # custom role name → its permissions
    bindings: frozenset[tuple[str, str, str, str]]  # (project, role, member, condition expression or "")

    @classmethod
    def of(cls, stack: Stack, project: str) -> "DeclaredGroupAccess":
        """`project` is the provider's (gcp:project): the group itself names none."""
        group = stack.one(GROUP).inputs
        template = stack.one(TEMPLATE).inputs
        bindings = frozenset(
            (
                b.inputs["project"],
                b.inputs["role"],
                b.inputs["member"],
                b.inputs.get("condition", {}).get("expression", ""),
            )
            for b in stack.of_type(PROJECT_MEMBER)
        )
        return cls(
            project=project,
            zone=group["zone"],
            group=group["name"],
            service_account=template.get("serviceAccount", {}).get("email", DEFAULT_COMPUTE_ACCOUNT),
            role_permissions=_custom_roles(stack),
            bindings=bindings,
        )

    def granted(self, permission: str, project: str, zone: str, group: str) -> bool:
        name = f"projects/{project}/zones/{zone}/instanceGroupManagers/{group}"
        for p, role, member, condition in self.bindings:
            if (p, member) != (project, f"serviceAccount:{self.service_account}"):
                continue
            if permission not in self.role_permissions.get(role, ()):
                continue
            if not condition:
                return True
            named = NAME_CONDITION.fullmatch(condition)
            if named is None:
                raise NotModelled(f'IAM condition {condition!r}: only resource.name == "…" is evaluated here')
            if NAMED_BY_CONDITIONS.fullmatch(name) and named.group(1) == name:
                return True
        return False


@dataclass
class GceStandin:
    project: str = "my-tpu-project"
    zone: str = "us-east5-b"
    instance: str = "tpu-sft-dev"
    machine_type: str = "ct6e-standard-8t"
    status: str = "RUNNING"  # the instance's, as instances.get answers it (a stop by Google or a person: TERMINATED)
    attributes: dict[str, str] = field(default_factory=dict)
    access: DeclaredAccess | None = None  # None: nothing is granted, so every stop or delete is refused
    group_access: DeclaredGroupAccess | None = None  # a slice host's: None grants no resize
    resizes: list[tuple[str, int]] = field(default_factory=list)  # (group, size) of every resize the API accepted
    preempted: list[tuple[str, str]] = field(default_factory=list)  # (instance, insertTime) of each preemption
    calls: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)  # method, path, headers
    api_times: list[float] = field(default_factory=list)  # when each stop/delete arrived (time.time())

    def __post_init__(self) -> None:
        if self.access:
            self.project, self.zone, self.instance = self.access.project, self.access.zone, self.access.instance
            self.machine_type = self.access.machine_type
        if self.group_access:
            self.project, self.zone = self.group_access.project, self.group_access.zone

    def start(self) -> "GceStandin":
        standin = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _answer(self, code: int, body: str, kind: str = "application/text") -> None:
                reply(self, code, body.encode(), kind)

            def _error(self, code: int, message: str) -> None:
                self._answer(code, json.dumps({"error": {"code": code, "message": message}}), "application/json")

            def do_GET(self) -> None:
                if INSTANCE_PATH.fullmatch(self.path.split("?", 1)[0]):
                    return self._instance_call("")
                if OPERATIONS_PATH.fullmatch(self.path.split("?", 1)[0]):
                    return self._operations()
                standin.calls.append(("GET", self.path, dict(self.headers)))
                if self.headers.get("Metadata-Flavor") != "Google":
                    return self._answer(403, "Missing Metadata-Flavor:Google header.")
                values = {
                    "/computeMetadata/v1/instance/service-accounts/default/token": json.dumps(
                        {"access_token": TOKEN, "expires_in": 3599, "token_type": "Bearer"}
                    ),
                    "/computeMetadata/v1/instance/name": standin.instance,
                    "/computeMetadata/v1/instance/zone": f"projects/123456789012/zones/{standin.zone}",
                    "/computeMetadata/v1/project/project-id": standin.project,
                    **{f"/computeMetadata/v1/instance/attributes/{k}": v for k, v in standin.attributes.items()},
                }
                if self.path not in values:
                    return self._answer(404, "not found")
                self._answer(200, values[self.path])

            def _instance_call(self, suffix: str) -> None:
                standin.calls.append((self.command, self.path, dict(self.headers)))
                if self.command != "GET":
                    standin.api_times.append(time.time())
                owner = self.headers.get("Authorization") == f"Bearer {OWNER_TOKEN}"
                if not owner and self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self._error(401, "Request is missing required authentication credential.")
                path = self.path.split("?", 1)[0]
                target = INSTANCE_PATH.fullmatch(path.removesuffix(suffix)) if path.endswith(suffix) else None
                if target is None:
                    return self._error(404, f"The requested URL {path} was not found on this server.")
                project, zone, name = target.groups()
                permission = PERMISSION[(self.command, suffix)]
                granted = owner or (standin.access and standin.access.granted(permission, project, zone, name))
                if not granted:
                    return self._error(
                        403,
                        f"Required '{permission}' permission for 'projects/{project}/zones/{zone}/instances/{name}'",
                    )
                if (project, zone, name) != (standin.project, standin.zone, standin.instance):
                    return self._error(
                        404, f"The resource 'projects/{project}/zones/{zone}/instances/{name}' was not found"
                    )
                if self.command == "GET":
                    instance = {"name": name, "machineType": standin.machine_type, "status": standin.status}
                    return self._answer(200, json.dumps(instance), "application/json")
                if suffix == "/start" and standin.machine_type.startswith(TPU_MACHINE_TYPE_PREFIX):
                    return self._error(400, START_REFUSED.format(name=name, machine_type=standin.machine_type))
                if suffix == "/start":
                    standin.status = "RUNNING"
                elif suffix == "/stop" and standin.access and standin.access.provisioning_model == "FLEX_START":
                    return self._error(400, "A FLEX_START instance cannot be stopped; delete it instead.")
                elif suffix == "/stop" and standin.machine_type.startswith(TPU_MACHINE_TYPE_PREFIX):
                    return self._error(
                        400,
                        f"An instance with TPUs attached ({standin.machine_type}) cannot be stopped and "
                        "restarted; delete it instead.",
                    )
                self._answer(
                    200,
                    json.dumps({"kind": "compute#operation", "name": "operation-1234-stand-in"}),
                    "application/json",
                )

            def _operations(self) -> None:
                standin.calls.append(("GET", self.path, dict(self.headers)))
                if self.headers.get("Authorization") != f"Bearer {OWNER_TOKEN}":
                    return self._error(401, "Request is missing required authentication credential.")
                query = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query)
                wanted = PREEMPTION_FILTER.fullmatch((query.get("filter") or [""])[0])
                if wanted is None:
                    raise NotModelled(f"an operations filter the stand-in does not evaluate: {query}")
                project, zone, name = wanted.groups()
                items = [
                    {
                        "operationType": "compute.instances.preempted",
                        "targetLink": f"https://www.googleapis.com/compute/v1/projects/{project}/zones/{zone}"
                        f"/instances/{instance}",
                        "insertTime": inserted,
                    }
                    for instance, inserted in standin.preempted
                    if (project, zone, instance) == (standin.project, standin.zone, name)
                ]
                self._answer(200, json.dumps({"items": items} if items else {}), "application/json")

            def _resize(self, target: re.Match) -> None:
                project, zone, group = target.groups()
                access = standin.group_access
                if not (access and access.granted(GROUP_PERMISSION, project, zone, group)):
                    where = f"projects/{project}/zones/{zone}/instanceGroupManagers/{group}"
                    return self._error(403, f"Required '{GROUP_PERMISSION}' permission for '{where}'")
                if (project, zone, group) != (access.project, access.zone, access.group):
                    where = f"projects/{project}/zones/{zone}/instanceGroupManagers/{group}"
                    return self._error(404, f"The resource '{where}' was not found")
                size = urllib.parse.parse_qs(urllib.parse.urlsplit(self.path).query).get("size", [""])[0]
                if not size.isdigit():
                    return self._error(400, "Invalid value for field 'size'")
                standin.resizes.append((group, int(size)))
                self._answer(
                    200,
                    json.dumps({"kind": "compute#operation", "name": "operation-5678-stand-in"}),
                    "application/json",
                )

            def do_POST(self) -> None:
                target = RESIZE_PATH.fullmatch(self.path.split("?", 1)[0])
                if target is None:
                    return self._instance_call("/start" if self.path.split("?", 1)[0].endswith("/start") else "/stop")
                standin.calls.append((self.command, self.path, dict(self.headers)))
                standin.api_times.append(time.time())
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    return self._error(401, "Request is missing required authentication credential.")
                self._resize(target)

            def do_DELETE(self) -> None:
                self._instance_call("")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    @property
    def host(self) -> str:
        return f"127.0.0.1:{self.server.server_address[1]}"

    def api_calls(self) -> list[tuple[str, str, dict[str, str]]]:
        return [c for c in self.calls if c[0] in ("POST", "DELETE")]

    def polls(self) -> int:
        """How many polls the watcher asking this server has begun: each starts by reading the action."""
        return sum(path.endswith(f"/attributes/{ACTION_KEY}") for _, path, _ in list(self.calls))

    def mark(self, timeout: float = 30) -> float:
        """The time now, returned once the watcher has begun a poll after it and finished that poll (the next one
        has begun). Whatever that poll saw busy, the watcher counts idle time from no earlier than the returned time
        (and its slice report says so): a lower bound for when it may act that a slow machine cannot break."""
        now = time.time()
        polls = self.polls()
        wait_until(lambda: self.polls() >= polls + 2, timeout, "a whole poll of the watcher")
        return now

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
