"""Runs the real `__main__.py` under the Pulumi SDK's own mock engine and records everything it declares.

The recording monitor keeps each RegisterResource request as the engine would receive it (inputs, parent,
dependencies, protect/retainOnDelete, …), and the stack's exported outputs — what `pulumi preview` and
`pulumi up` would see, without an engine, a cloud or a network.
"""

from __future__ import annotations

import asyncio
import os
import re
import runpy
import secrets
import tempfile
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any, Iterator, Mapping

import pulumi
from google.protobuf import json_format
from pulumi.runtime import config as runtime_config
from pulumi.runtime import mocks as pulumi_mocks
from pulumi.runtime import rpc
from pulumi.runtime.stack import run_in_stack

from rehearsal import compute_standin, flex_start_rules, group_rules, project_apis
from rehearsal.autonaming import auto_named
from rehearsal.name_rules import refuse_invalid_labels, refuse_invalid_names
from workload.spend.autostop import COMPUTE_API_ENV

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_COMPUTE_ACCOUNT = "123456789012-compute@developer.gserviceaccount.com"  # what the API attaches unasked
MIG_ID = 4815162342  # the server-assigned id of a managed instance group (an integer, as the API gives it)


def instance_id_of(name: str) -> str:
    """What Compute Engine would answer for a host's id unless a test says otherwise: decimal, as the API gives it,
    one per host number (tpu-sft-dev-02 → 7000000002; a VM's name has none: 7000000000)."""
    number = name.rsplit("-", 1)[-1]
    return str(7_000_000_000 + (int(number) if number.isdigit() else 0))


def is_secret(value: Any) -> bool:
    """Whether the engine received `value` marked secret (state stores such values encrypted)."""
    return isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig


def plain(value: Any) -> Any:
    """`value` with every secret replaced by a marker: what would be readable in the stack's state."""
    if is_secret(value):
        return "[secret]"
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [plain(v) for v in value]
    return value


@dataclass
class Declared:
    type: str
    name: str
    inputs: dict[str, Any]
    parent: str
    dependencies: list[str]
    protect: bool
    retain_on_delete: bool
    delete_before_replace: bool
    ignore_changes: list[str]
    replace_on_changes: list[str]
    urn: str = ""
    custom_timeouts: dict[str, str] = field(default_factory=dict)  # create/update/delete, as Pulumi sends them
    import_id: str = ""  # the `import` option: the id of an existing resource to take into the state
    outputs: dict[str, Any] = field(default_factory=dict)  # what the mock answered: a command's inputs and stdout


@dataclass
class Stack:
    resources: list[Declared] = field(default_factory=list)
    outputs: dict[str, Any] = field(default_factory=dict)

    def of_type(self, type_: str) -> list[Declared]:
        return [r for r in self.resources if r.type == type_]

    def one(self, type_: str) -> Declared:
        found = self.of_type(type_)
        assert len(found) == 1, f"expected one {type_}, found {len(found)}"
        return found[0]


# The engine's builtin read of a stack's snapshot: every resource, by URN, with its type and outputs
# (pulumi/pulumi pkg/resource/deploy/builtins.go `readStackResourceOutputs`).
STATE_READ = "pulumi:pulumi:readStackResourceOutputs"
COMMAND = "command:local:Command"


def state_outputs(state: Stack, project: str) -> dict[str, Any]:
    """What STATE_READ answers for a stack whose state holds what `state` recorded (its VM in the provider's
    `project` where it names none), of the outputs the provider id a VM is imported by (the bridged provider's
    `id`: projects/P/zones/Z/instances/N), and a command's whole state: pulumi-command's outputs are its inputs and
    what it printed (`stdout`; a rehearsal puts there what the command printed when it ran)."""

    def id_of(r: Declared) -> str | None:
        if r.type != flex_start_rules.INSTANCE:
            return None
        return flex_start_rules.provider_id(r.inputs.get("project", project), r.inputs["zone"], r.inputs["name"])

    def outputs(r: Declared) -> dict[str, Any]:
        return {"id": id_of(r), **(r.outputs if r.type == COMMAND else {})}

    return {r.urn: {"type": r.type, "outputs": outputs(r)} for r in state.resources}


def named_as_google_would(args: pulumi.runtime.MockResourceArgs) -> dict[str, Any]:
    """The resource's state as Google would create it: named by Pulumi where the program gave no name, and refused
    (raising, which fails the program's run as a provider error does) where its service would refuse a name or a
    label."""
    state = auto_named(args.typ, args.name, dict(args.inputs))
    refuse_invalid_names(args.typ, state)
    refuse_invalid_labels(args.typ, state)
    flex_start_rules.refuse_an_incomplete_flex_start_vm(args.typ, state)
    return state


class _Mocks(pulumi.runtime.Mocks):
    """What the cloud and pulumi-command would answer: ids and addresses, and each command's stdout."""

    def __init__(
        self,
        command_stdout: Mapping[str, str],
        instance_ids: Mapping[str, str | None],
        statuses: Mapping[str, str],
        compute_api_off: bool,
        capacity: flex_start_rules.FlexStartCapacity | None = None,
        state: Stack | None = None,
        project: str = "",
    ):
        self.command_stdout, self.instance_ids, self.capacity = command_stdout, instance_ids, capacity
        self.state, self.project = state or Stack(), project
        self.statuses, self.compute_api_off = statuses, compute_api_off
        self.resource_policies: dict[str, dict[str, Any]] = {}  # by self link, as a group names its policy
        self.templates: dict[str, dict[str, Any]] = {}  # by unique self link, as a group's version names its template
        self.groups: dict[str, dict[str, Any]] = {}  # by name, as a resize request names its group

    def new_resource(self, args: pulumi.runtime.MockResourceArgs):
        state = named_as_google_would(args)
        if args.typ == "gcp:compute/instance:Instance":
            state["instanceId"] = f"{args.name}-id"
            for nic in state.get("networkInterfaces", []):
                for config in nic.get("accessConfigs", []):
                    config["natIp"] = "203.0.113.7"
            if "serviceAccount" in state:  # no e-mail given: the API attaches the default compute account
                state["serviceAccount"].setdefault("email", DEFAULT_COMPUTE_ACCOUNT)
        if args.typ == "random:index/randomId:RandomId":  # fresh bytes on every creation, as the provider draws them
            state["hex"] = state.get("prefix", "") + secrets.token_hex(int(state["byteLength"]))
        if args.typ == "gcp:projects/iAMCustomRole:IAMCustomRole":
            state["name"] = f"projects/{state['project']}/roles/{state['roleId']}"
        if args.typ == "gcp:compute/disk:Disk":
            state["selfLink"] = f"https://compute/{args.name}"
        if args.typ == "command:local:Command":
            state["stdout"] = self.command_stdout.get(args.name.rsplit("-", 1)[1], "")
        if args.typ == group_rules.WORKLOAD_POLICY:
            state["selfLink"] = f"https://compute/resourcePolicies/{args.name}"
            self.resource_policies[state["selfLink"]] = state
        if args.typ == group_rules.GROUP:
            group_rules.refuse_a_tpu_group_not_in_bulk(state, self.resource_policies)
            group_rules.refuse_bulk_without_its_models(state, self.resource_policies, self.templates)
            state["instanceGroupManagerId"] = MIG_ID
            self.groups[state.get("name") or args.name] = state
        if args.typ == group_rules.TEMPLATE:
            state["selfLinkUnique"] = f"https://compute/instanceTemplates/{args.name}?uniqueId=1"
            self.templates[state["selfLinkUnique"]] = state
        if args.typ == group_rules.RESIZE_REQUEST:
            group_rules.refuse_a_resize_request_in_a_tpu_group(state, self.groups, self.templates)
        return f"{args.name}-id", state

    def call(self, args: pulumi.runtime.MockCallArgs):
        if args.token == STATE_READ:
            return {"name": args.args["stackName"], "outputs": state_outputs(self.state, self.project)}
        if args.token == "gcp:compute/getDefaultServiceAccount:getDefaultServiceAccount":
            return {"email": DEFAULT_COMPUTE_ACCOUNT}
        if args.token == "gcp:compute/getInstance:getInstance":  # the VM, or a slice's host, by name
            name, project = args.args["name"], args.args["project"]
            where = flex_start_rules.provider_id(project, args.args["zone"], name)
            # Google's 403 for a disabled API (rehearsal/project_apis.py), as the provider wraps it
            if self.compute_api_off:
                said = f"Compute Engine API has not been used in project {project} before or it is disabled"
                return {}, [("name", f"Error when reading or editing Instance {name}: googleapi: Error 403: {said}")]
            if self.capacity is not None and name in self.capacity.made:  # the provider's id: the instance's path
                return {
                    "id": self.capacity.made[name],
                    "name": name,
                    "instanceId": "7000000000",
                    "currentStatus": "RUNNING",
                }
            # A slice's hosts are numbered and exist unless told gone; the VM exists where a test gives its status
            # or id; anything else fails as pulumi-gcp's 404.
            gone = name in self.instance_ids and self.instance_ids[name] is None
            known = name in self.instance_ids or name in self.statuses or re.search(r"-[0-9]+$", name)
            if gone or not known:
                return {}, [("name", f"{where} not found")]
            return {
                "id": where,
                "name": name,
                "instanceId": self.instance_ids.get(name) or instance_id_of(name),
                "currentStatus": self.statuses.get(name, "RUNNING"),
                # the address a VM with an access config gets, as for a declared Instance above
                "networkInterfaces": [{"accessConfigs": [{"natIp": "203.0.113.7"}]}],
            }
        return {}


class _RecordingMonitor(pulumi_mocks.MockMonitor):
    def __init__(self, mocks: _Mocks, stack: Stack):
        super().__init__(mocks)
        self.stack, self.capacity = stack, mocks.capacity

    def RegisterResource(self, request):
        inputs = json_format.MessageToDict(request.object)
        project_apis.refuse_a_call_to_a_disabled_api(
            request.type, inputs.get("project", "<gcp:project>"), request.dependencies, self.stack.resources
        )
        capacity = self.capacity
        flex = (inputs.get("scheduling") or {}).get("provisioningModel") == flex_start_rules.FLEX_START
        if capacity is not None and flex and request.type == flex_start_rules.INSTANCE and not request.importId:
            capacity.create(inputs["name"], inputs["zone"], request.customTimeouts.create)
        response = super().RegisterResource(request)
        if request.type != "pulumi:pulumi:Stack":
            self.stack.resources.append(
                Declared(
                    type=request.type,
                    name=request.name,
                    inputs=json_format.MessageToDict(request.object),
                    parent=request.parent,
                    dependencies=list(request.dependencies),
                    protect=request.protect,
                    retain_on_delete=request.retainOnDelete,
                    delete_before_replace=request.deleteBeforeReplace,
                    ignore_changes=list(request.ignoreChanges),
                    replace_on_changes=list(request.replaceOnChanges),
                    urn=response.urn,
                    custom_timeouts=json_format.MessageToDict(request.customTimeouts),
                    import_id=request.importId,
                    outputs=json_format.MessageToDict(response.object),
                )
            )
        return response

    def RegisterResourceOutputs(self, request):
        if request.urn.split("::")[2] == "pulumi:pulumi:Stack":  # the root stack itself, not a child of it
            self.stack.outputs = json_format.MessageToDict(request.outputs)
        return super().RegisterResourceOutputs(request)


def _run_main() -> None:
    runpy.run_path(str(ROOT / "__main__.py"), run_name="__main__")


# Where the program asks the Hub unless a test serves one: a loopback port nothing listens on (discard), so that the
# program's access check finds the Hub unreachable at once and says so, with no network.
UNREACHABLE_HUB = "http://127.0.0.1:9"


@cache
def _gcloud_dir(logged_in: bool) -> Path:
    """A folder holding the stand-in's `gcloud` (rehearsal/compute_standin.py), made once per process."""
    folder = Path(tempfile.mkdtemp(prefix="tpu-sft-gcloud-"))
    compute_standin.install_gcloud(folder, logged_in)
    return folder


def fitting_reservations(config: Mapping[str, str]) -> dict[tuple[str, str, str], str]:
    """The reservation `config` names, in the mode its provisioning model consumes: a user whose reservation fits."""
    name = config.get("tpu-sft:reservation")
    model = config.get("tpu-sft:provisioningModel", "RESERVATION_BOUND")
    if not name or model not in ("RESERVATION_BOUND", "STANDARD"):
        return {}
    project, zone = config.get("gcp:project", ""), config.get("gcp:zone", "")
    if name.startswith("projects/"):
        project, name = name.split("/")[1], name.split("/")[3]
    mode = compute_standin.CALENDAR if model == "RESERVATION_BOUND" else compute_standin.DEFAULT
    return {(project, zone, name): mode}


@contextmanager
def _google_standins(
    reservations: Mapping[tuple[str, str, str], str], compute_denied: bool, gcloud_logged_in: bool, hub: str
) -> Iterator[compute_standin.Compute]:
    """What the program asks outside the engine while it runs: Compute Engine's reservations (a stand-in, read with the
    stand-in gcloud's token) and the Hub (`hub`)."""
    with ExitStack() as stack:
        compute = stack.enter_context(compute_standin.serving(reservations, denied=compute_denied))
        before = {k: os.environ.get(k) for k in ("PATH", COMPUTE_API_ENV, "HF_ENDPOINT")}
        os.environ["PATH"] = f"{_gcloud_dir(gcloud_logged_in)}{os.pathsep}{before['PATH'] or ''}"
        os.environ[COMPUTE_API_ENV] = compute.url
        os.environ["HF_ENDPOINT"] = hub
        try:
            yield compute
        finally:
            for key, value in before.items():
                if value is None:
                    os.environ.pop(key, None)
                else:
                    os.environ[key] = value


def run_program(
    config: dict[str, str],
    *,
    secret_keys: tuple[str, ...] = (),
    stack: str = "dev",
    preview: bool = True,
    into: Stack | None = None,
    command_stdout: Mapping[str, str] | None = None,
    instance_ids: Mapping[str, str | None] | None = None,
    statuses: Mapping[str, str] | None = None,
    compute_api_off: bool = False,
    capacity: flex_start_rules.FlexStartCapacity | None = None,
    state: Stack | None = None,
    cwd: Path = ROOT,
    reservations: Mapping[tuple[str, str, str], str] | None = None,
    compute_denied: bool = False,
    gcloud_logged_in: bool = True,
    hub: str = UNREACHABLE_HUB,
) -> Stack:
    """Run `__main__.py` with this config, recording into `into` (so a failed run can be inspected too).

    `command_stdout` gives the stdout each post-deploy command (by its last name part, e.g. "train") reports;
    `instance_ids` the id Compute Engine gives a host (by name), where not `instance_id_of` it; None: the host does
    not exist (the group has not made it, or deleted it), and getInstance fails as pulumi-gcp's does; `statuses` the
    status getInstance answers for an instance (by name), RUNNING unless told; the VM itself exists only where a test
    gives its id or status, or where `capacity` (Compute Engine filling flex-start requests late) has made it;
    `compute_api_off`: an empty project's Compute Engine API, off, which fails every getInstance with Google's 403.
    `state` is what the stack's state holds as this run starts (what an earlier run recorded), as the engine's
    readStackResourceOutputs reads it; None: an empty state.
    `cwd` is the directory it runs in, as `pulumi` runs it in the project's (what it reads and writes relative to it).
    What the program asks outside the engine (infra/config/google_checks.py): `reservations` the reservations Compute
    Engine holds ((project, zone, name) → CALENDAR or DEFAULT; None: the config's own, in the mode its provisioning
    model consumes), `compute_denied` the caller may not read them, `gcloud_logged_in` false: gcloud has no account;
    `hub` the Hub's URL (unreachable unless a test serves one).
    Raises what the program raises (e.g. pulumi.RunError).
    """
    recorded = into if into is not None else Stack()
    loop = asyncio.new_event_loop()
    asyncio.set_event_loop(loop)  # before set_mocks: the SDK ties its futures to the loop current then
    mocks = _Mocks(
        command_stdout or {},
        instance_ids or {},
        statuses or {},
        compute_api_off,
        capacity,
        state,
        config.get("gcp:project", ""),
    )
    monitor = _RecordingMonitor(mocks, recorded)
    pulumi.runtime.set_mocks(mocks, project="tpu-sft", stack=stack, preview=preview, monitor=monitor)
    # set_mocks made a finished root resource; run_in_stack makes ours
    pulumi.runtime.settings.set_root_resource(None)  # type: ignore[arg-type]
    runtime_config.set_all_config(dict(config), list(secret_keys))
    previous = os.getcwd()
    os.chdir(cwd)
    known = fitting_reservations(config) if reservations is None else reservations
    try:
        with _google_standins(known, compute_denied, gcloud_logged_in, hub):
            loop.run_until_complete(run_in_stack(lambda: _run_main()))
    finally:
        # A program that failed in an apply leaves the rest of its outputs pending, tied to this loop; the SDK keeps
        # them (process-wide) for the next run to wait for, which would then fail on the closed loop.
        pulumi.runtime.settings.SETTINGS.outputs.clear()
        loop.close()
        os.chdir(previous)
        runtime_config.set_all_config({}, [])
    return recorded
