"""Every stack setting, read once and validated before any resource is declared.

`parse` is pure (a mapping of stack keys to raw values in, a frozen `Settings` out) so that any config can be
checked without an engine; `from_pulumi` feeds it the stack's config. Errors are `ConfigError`: one line
naming the key, the problem and the fix.
"""

from __future__ import annotations

import ipaddress
import os
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

from infra import publish_settings
from infra.cost import PRICE_TABLE, estimate
from infra.run_cap import default_max_run_hours
from infra.ssh_access import ACCESS_MODES, os_login_user
from infra.ssh_identity import require_private_key
from workload.accelerators import ACCELERATORS, Accelerator
from workload.config import BY_KEY as PIPELINE_SETTINGS
from workload.config import (
    NAMESPACE,
    ConfigError,
    PipelineConfig,
    parse_bool,
    parse_choice,
    parse_float,
    parse_int,
    parse_list,
    parse_pattern,
    parse_structured,
    set_hint,
    stack_key,
)

PROVISIONING_MODELS = ("RESERVATION_BOUND", "SPOT", "FLEX_START", "STANDARD")
ACCESS_PATHS = ("iap", "direct")  # how SSH reaches the VM: an IAP tunnel, or straight to its external IP
IAP_RANGE = "35.235.240.0/20"  # Google's IAP TCP-forwarding source range
IMAGE = "ubuntu-os-accelerator-images/ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e"
DATA_DISK_TYPES = ("hyperdisk-balanced", "hyperdisk-ml")  # what v6e VMs can attach
AUTOSTOP_ACTIONS = ("stop", "delete", "off")  # what the VM does to itself once idle (workload/autostop.py)
# Consuming an ordinary (on-demand) specific reservation: STANDARD; RESERVATION_BOUND consumes a calendar-mode
# (future) reservation. Spot and flex-start VMs consume none.
RESERVATION_MODELS = ("RESERVATION_BOUND", "STANDARD")

# Matched whole (re.fullmatch, through parse_pattern), with ASCII classes only.
_PROJECT = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]")
_ZONE = re.compile(r"[a-z]+-[a-z]+[0-9]+-[a-z]")
_RESOURCE_NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
_RESERVATION = re.compile(r"(projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/reservations/)?[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
_LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
_LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")
_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
_ACCOUNT = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
_SERVICE_ACCOUNT = re.compile(r"[a-z0-9][a-z0-9.-]{0,62}@[a-z0-9][a-z0-9.-]*\.gserviceaccount\.com")
# Cloud Storage bucket names without dots (dotted names need domain verification): 3-63 characters, not beginning
# with "goog", holding no "google" or close misspelling (cloud.google.com/storage/docs/buckets, "Bucket names").
_BUCKET = re.compile(r"[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]")
_BUCKET_RESERVED = re.compile(r"goog|.*g[o0][o0]g[l1]e")
# A Hugging Face access token: never allowed in a plain (non-secret) setting.
_HF_TOKEN = re.compile(r"hf_[A-Za-z0-9]{20,}")

INFRA_KEYS = (
    "reservation", "provisioningModel", "instanceName", "network", "subnetwork", "bootDiskSizeGb",
    "dataDiskSizeGb", "dataDiskType", "keepDataDisk", "allowDataDiskReplace", "access", "externalIp", "sshSourceRanges",
    "dangerouslyAllowSshFromAnywhere", "sshUser", "sshPublicKey", "sshPublicKeyPath", "labels", "pricePerChipHour",
    "maxRunHours", "hfToken", "serviceAccount", "sshAccess", "osLoginAccount", "autostop", "idleMinutes",
    "checkpointBucket", "checkpointRetentionDays", "bucketForceDestroy",
    *publish_settings.KEYS,
)
DEFAULT_PUBLIC_KEY = "~/.ssh/google_compute_engine.pub"  # the key `gcloud compute ssh` creates and uses


@dataclass(frozen=True)
class Settings:
    project: str
    zone: str
    stack: str
    pipeline: PipelineConfig
    accelerator: Accelerator
    reservation: str | None
    provisioning_model: str = "RESERVATION_BOUND"
    instance_name: str = "tpu-sft"
    network: str = "default"
    subnetwork: str | None = None
    boot_disk_size_gb: int = 200
    data_disk_size_gb: int = 100
    data_disk_type: str = "hyperdisk-balanced"
    keep_data_disk: bool = False
    access: str = "iap"
    external_ip: bool = True  # as the seed: the VM's installs need egress; False needs Cloud NAT on the network
    ssh_source_ranges: tuple[str, ...] = (IAP_RANGE,)
    ssh_user: str = "tpu-sft"
    ssh_public_key_path: str = DEFAULT_PUBLIC_KEY
    ssh_public_key: str = field(default="", repr=False)
    labels: tuple[tuple[str, str], ...] = ()
    price_per_chip_hour: float = PRICE_TABLE["v6e"]["usd_per_chip_hour"]
    max_run_hours: int | None = None  # None: no cap (tpu-sft:maxRunHours off); unset, parse() derives one
    hf_token: str | None = field(default=None, repr=False)  # only ever handed on as a Pulumi secret
    service_account: str | None = None  # the VM's identity; None: the project's default compute service account
    checkpoint_bucket: str = ""  # "" until parse derives it from the project and instance name
    checkpoint_retention_days: int = 30
    bucket_force_destroy: bool = False
    ssh_access: str = "metadata"  # how the VM trusts the key: ssh-keys metadata, or OS Login (infra/ssh_access.py)
    os_login_account: str | None = None  # oslogin: the Google account whose login profile holds the key
    autostop: str = "stop"
    idle_minutes: int = 30
    publish_gcs_uri: str | None = None  # publishing is opt-in: nothing unless a destination is set
    publish_hub_repo: str | None = None
    publish_hub_public: bool = False
    hf_write_token: str | None = field(default=None, repr=False)  # only ever handed on as a Pulumi secret

    @property
    def is_slice(self) -> bool:
        """A multi-host slice (tpu-sft:acceleratorType v6e-16 and up): a managed instance group, not one VM."""
        return self.accelerator.is_slice

    @property
    def publishes(self) -> bool:
        return bool(self.publish_gcs_uri or self.publish_hub_repo)

    @property
    def ssh_private_key_path(self) -> str:
        return self.ssh_public_key_path.removesuffix(".pub")


def _secret_key(key: str) -> str:
    """Where a token found in plain text belongs: its own key if it is a token setting, else tpu-sft:hfToken."""
    return key if key.endswith("Token") else stack_key("hfToken")


def _cidrs(raw: Any, allow_anywhere: bool) -> tuple[str, ...]:
    key = "sshSourceRanges"
    ranges = parse_list(key, raw, f'["{IAP_RANGE}"]')
    if not ranges:
        raise ConfigError(stack_key(key), "is empty, so nothing could reach the VM", set_hint(key,
                                                                                              f"'[\"{IAP_RANGE}\"]'"))
    for cidr in ranges:
        try:
            if not isinstance(cidr, str) or not cidr.isascii():  # ip_network(5) is 0.0.0.5/32
                raise TypeError(cidr)
            network = ipaddress.ip_network(cidr, strict=True)
        except (TypeError, ValueError):
            raise ConfigError(
                stack_key(key), f"{cidr!r} is not a CIDR range like 203.0.113.0/24", set_hint(key,
                                                                                              f"'[\"{IAP_RANGE}\"]'")
            ) from None
        if network.prefixlen == 0 and not allow_anywhere:
            raise ConfigError(
                stack_key(key),
                f"{cidr} opens SSH to the whole internet",
                "list your own ranges, or set tpu-sft:dangerouslyAllowSshFromAnywhere true if you really mean it",
            )
    return tuple(ranges)


def _labels(raw: Any, stack: str) -> tuple[tuple[str, str], ...]:
    labels = {"app": "tpu-sft", "stack": stack.lower()}
    if raw is not None:
        given = parse_structured("labels", raw, dict, '{"owner": "me"}')
        for k, v in given.items():
            if not _LABEL_KEY.fullmatch(str(k)) or not isinstance(v, str) or not _LABEL_VALUE.fullmatch(v):
                raise ConfigError(
                    stack_key("labels"),
                    f"label {k}={v!r} is not valid (lower-case letters, digits, '_' and '-'; keys start with a letter)",
                    "pulumi config set --path tpu-sft:labels.owner my-team",
                )
        labels.update(given)
    return tuple(sorted(labels.items()))


# One key on one line (a newline would smuggle a second key into the VM's ssh-keys metadata), comment optional.
_PUBLIC_KEY = re.compile(r"(ssh-(ed25519|rsa)|ecdsa-sha2-[A-Za-z0-9-]+) [A-Za-z0-9+/=]+( [^\r\n]*)?")


def _os_login(get: Callable[[str], Any]) -> dict[str, Any]:
    """tpu-sft:sshAccess and, for OS Login, the account and the POSIX user Google gives it."""
    mode = parse_choice("sshAccess", get("sshAccess") or "metadata", ACCESS_MODES)
    account = get("osLoginAccount")
    if mode != "oslogin":
        if account is not None:
            raise ConfigError(stack_key("osLoginAccount"), "is only used with tpu-sft:sshAccess oslogin",
                              "pulumi config rm tpu-sft:osLoginAccount, or pulumi config set tpu-sft:sshAccess oslogin")
        return {"ssh_access": mode}
    if account is None:
        raise ConfigError(stack_key("osLoginAccount"),
                          "is required with tpu-sft:sshAccess oslogin: the key is registered to it",
                          "pulumi config set tpu-sft:osLoginAccount \"$(gcloud config get account)\"")
    parse_pattern("osLoginAccount", account, _ACCOUNT, "a Google account e-mail", "me@example.com")
    values = {"ssh_access": mode, "os_login_account": account}
    if get("sshUser") is None:
        user = os_login_user(account)
        if user is None:
            raise ConfigError(
                stack_key("sshUser"),
                f"cannot be derived from {account} (a service account, or a name over 32 characters)",
                "pulumi config set tpu-sft:sshUser <its POSIX name: gcloud compute os-login describe-profile>",
            )
        values["ssh_user"] = user
    return values


def _checkpoint_bucket(raw: Any, project: str, instance_name: str | None) -> str:
    """The given name, or one derived from the project id (globally unique) and the instance name."""
    if raw is not None:
        name = parse_pattern("checkpointBucket", raw, _BUCKET, "a bucket name (3-63 of a-z, 0-9, '-', '_')",
                             f"{project}-tpu-sft-runs")
        _not_reserved_by_google(name, f"{project}-tpu-sft-runs")
        return name
    name = f"{project}-{instance_name or Settings.instance_name}-runs"
    if not _BUCKET.fullmatch(name):
        raise ConfigError(stack_key("checkpointBucket"),
                          f"the derived bucket name {name!r} is longer than 63 characters",
                          set_hint("checkpointBucket", f"{project[:40]}-runs"))
    _not_reserved_by_google(name, f"{project}-tpu-sft-runs")
    return name


def _not_reserved_by_google(bucket: str, example: str) -> None:
    """Cloud Storage keeps "goog…" and "google" (and its look-alikes) for Google's own buckets."""
    if _BUCKET_RESERVED.match(bucket):
        raise ConfigError(stack_key("checkpointBucket"),
                          f"{bucket!r} begins with \"goog\" or contains \"google\", which Cloud Storage reserves",
                          set_hint("checkpointBucket", example))


def parse(
    raw: Mapping[str, Any],
    *,
    stack: str,
    secret_keys: frozenset[str] = frozenset(),
) -> Settings:
    """Validate a stack's config, given as fully qualified keys (`gcp:zone`, `tpu-sft:steps`) to raw values.
    Reads no file: the same config gives the same settings on every machine."""
    for key, value in raw.items():
        if key not in secret_keys and isinstance(value, str) and _HF_TOKEN.search(value):
            raise ConfigError(
                key, "holds what looks like a Hugging Face token in plain text",
                f"remove it and run `pulumi config set --secret {_secret_key(key)}` instead",
            )
    ours = {k.split(":", 1)[1]: v for k, v in raw.items() if k.startswith(f"{NAMESPACE}:")}
    pipeline_keys = set(PIPELINE_SETTINGS)
    unknown = sorted(set(ours) - pipeline_keys - set(INFRA_KEYS))
    if unknown:
        raise ConfigError(
            stack_key(unknown[0]), "is not a tpu-sft setting (a typo?)",
            f"`pulumi config rm {stack_key(unknown[0])}`; the settings are listed in Pulumi.dev.yaml",
        )

    project = raw.get("gcp:project")
    if project is None:
        raise ConfigError("gcp:project", "is not set", "pulumi config set gcp:project <your-project-id>")
    parse_pattern("gcp:project", project, _PROJECT, "a Google Cloud project id", "my-project-123")
    zone = raw.get("gcp:zone")
    if zone is None:
        raise ConfigError("gcp:zone", "is not set", "pulumi config set gcp:zone us-east5-b")
    parse_pattern("gcp:zone", zone, _ZONE, "a zone like us-east5-b", "us-east5-b")

    pipeline = PipelineConfig.from_mapping({k: v for k, v in ours.items() if k in pipeline_keys})
    values: dict[str, Any] = {}
    get = ours.get

    model = parse_choice("provisioningModel", get("provisioningModel", "RESERVATION_BOUND"), PROVISIONING_MODELS)
    values["provisioning_model"] = model
    reservation = get("reservation")
    if reservation is not None:
        parse_pattern("reservation", reservation, _RESERVATION, "a reservation name", "my-v6e-reservation")
    for key, attr in (("instanceName", "instance_name"), ("network", "network"), ("subnetwork", "subnetwork")):
        if get(key) is not None:
            values[attr] = parse_pattern(key, get(key), _RESOURCE_NAME, "a Compute Engine resource name", "tpu-sft")
    if get("bootDiskSizeGb") is not None:
        values["boot_disk_size_gb"] = parse_int("bootDiskSizeGb", get("bootDiskSizeGb"), minimum=100, example="200")
    if get("dataDiskSizeGb") is not None:
        values["data_disk_size_gb"] = parse_int("dataDiskSizeGb", get("dataDiskSizeGb"), minimum=10, example="100")
    if get("dataDiskType") is not None:
        values["data_disk_type"] = parse_choice("dataDiskType", get("dataDiskType"), DATA_DISK_TYPES)
    if get("keepDataDisk") is not None:
        values["keep_data_disk"] = parse_bool("keepDataDisk", get("keepDataDisk"))
    if get("allowDataDiskReplace") is not None:  # validated here, read by the policy pack (policy/disk.py)
        parse_bool("allowDataDiskReplace", get("allowDataDiskReplace"))
    if get("access") is not None:
        values["access"] = parse_choice("access", get("access"), ACCESS_PATHS)
    if get("externalIp") is not None:
        values["external_ip"] = parse_bool("externalIp", get("externalIp"))
    anywhere = parse_bool("dangerouslyAllowSshFromAnywhere", get("dangerouslyAllowSshFromAnywhere", "false"))
    # The default is checked like a listed range, so a default that opened SSH to the internet would be refused.
    values["ssh_source_ranges"] = _cidrs(get("sshSourceRanges", [IAP_RANGE]), anywhere)
    if get("sshUser") is not None:
        values["ssh_user"] = parse_pattern("sshUser", get("sshUser"), _USER, "a Linux user name", "tpu-sft")
    values.update(_os_login(get))
    key_path = get("sshPublicKeyPath", DEFAULT_PUBLIC_KEY)
    if not isinstance(key_path, str) or not key_path.endswith(".pub") or key_path == ".pub":
        raise ConfigError(
            stack_key("sshPublicKeyPath"), f"expected the path of a public key file (.pub), got {key_path!r}; "
            "its private key is the same path without .pub", set_hint("sshPublicKeyPath", DEFAULT_PUBLIC_KEY),
        )
    values["ssh_public_key_path"] = key_path
    if get("sshPublicKey") is None:
        raise ConfigError(
            stack_key("sshPublicKey"),
            "is not set; the VM's SSH key must come from the stack, not from the machine that runs pulumi",
            f"pulumi config set {stack_key('sshPublicKey')} \"$(cat {DEFAULT_PUBLIC_KEY})\"",
        )
    values["ssh_public_key"] = parse_pattern(
        "sshPublicKey", get("sshPublicKey"), _PUBLIC_KEY, "an OpenSSH public key", f"\"$(cat {DEFAULT_PUBLIC_KEY})\""
    )
    values["labels"] = _labels(get("labels"), stack)
    if get("pricePerChipHour") is not None:
        values["price_per_chip_hour"] = parse_float("pricePerChipHour", get("pricePerChipHour"), example="2.70")
    values["max_run_hours"] = _max_run_hours(get("maxRunHours"), pipeline)
    if get("autostop") is not None:
        values["autostop"] = parse_choice("autostop", get("autostop"), AUTOSTOP_ACTIONS)
    if get("idleMinutes") is not None:
        values["idle_minutes"] = parse_int("idleMinutes", get("idleMinutes"), minimum=1, example="30")
    if get("serviceAccount") is not None:
        values["service_account"] = parse_pattern(
            "serviceAccount", get("serviceAccount"), _SERVICE_ACCOUNT, "a service account e-mail",
            "tpu-sft-vm@my-project.iam.gserviceaccount.com",
        )
    values["checkpoint_bucket"] = _checkpoint_bucket(get("checkpointBucket"), project, values.get("instance_name"))
    if get("checkpointRetentionDays") is not None:
        values["checkpoint_retention_days"] = parse_int(
            "checkpointRetentionDays", get("checkpointRetentionDays"), minimum=1, example="30")
    if get("bucketForceDestroy") is not None:
        values["bucket_force_destroy"] = parse_bool("bucketForceDestroy", get("bucketForceDestroy"))
    if get("hfToken") is not None:
        if stack_key("hfToken") not in secret_keys:
            raise ConfigError(
                stack_key("hfToken"), "is stored in plain text",
                "pulumi config rm tpu-sft:hfToken && pulumi config set --secret tpu-sft:hfToken <token>",
            )
        values["hf_token"] = get("hfToken")
    values.update(publish_settings.parse(get, secret_keys))

    settings = Settings(
        project=project, zone=zone, stack=stack, pipeline=pipeline,
        accelerator=ACCELERATORS[pipeline.accelerator_type], reservation=reservation, **values,
    )
    for rule in CROSS_KEY_RULES:
        rule(settings)
    single_host_keys_on_a_slice(settings, frozenset(ours))
    return settings


def reservation_matches_model(s: Settings) -> None:
    """A RESERVATION_BOUND VM names its (calendar-mode) reservation; a STANDARD one may name an ordinary one;
    SPOT and FLEX_START VMs consume none."""
    if s.provisioning_model == "RESERVATION_BOUND" and not s.reservation:
        raise ConfigError(
            stack_key("reservation"), "is required when provisioningModel is RESERVATION_BOUND",
            f"{set_hint('reservation', '<your reservation name>')}, or choose another tpu-sft:provisioningModel",
        )
    if s.provisioning_model not in RESERVATION_MODELS and s.reservation:
        raise ConfigError(
            stack_key("reservation"), f"cannot be consumed by a {s.provisioning_model} VM",
            "pulumi config rm tpu-sft:reservation, or set tpu-sft:provisioningModel STANDARD (an ordinary "
            "reservation) or RESERVATION_BOUND (a calendar-mode one)",
        )


def direct_access_needs_external_ip(s: Settings) -> None:
    if s.access == "direct" and not s.external_ip:
        raise ConfigError(
            stack_key("externalIp"), "is false, but tpu-sft:access direct needs the VM's external IP",
            "pulumi config set tpu-sft:access iap, or pulumi config set tpu-sft:externalIp true",
        )


def flex_start_needs_run_cap(s: Settings) -> None:
    if s.provisioning_model == "FLEX_START" and s.max_run_hours is None:
        raise ConfigError(
            stack_key("maxRunHours"), "is required for FLEX_START VMs (Google caps their run time)",
            set_hint("maxRunHours", "4"),
        )


# Flex-start VMs run "for up to seven days"; a slice's resize request takes a run duration of at most 604800 s
# (cloud.google.com/compute/docs/instance-groups/about-resize-requests-mig; pulumi-gcp ResizeRequest).
FLEX_START_MAX_RUN_HOURS = 7 * 24


def flex_start_within_seven_days(s: Settings) -> None:
    if s.provisioning_model == "FLEX_START" and s.max_run_hours and s.max_run_hours > FLEX_START_MAX_RUN_HOURS:
        raise ConfigError(
            stack_key("maxRunHours"),
            f"is {s.max_run_hours}, but FLEX_START VMs run for at most {FLEX_START_MAX_RUN_HOURS} hours (seven days)",
            set_hint("maxRunHours", str(FLEX_START_MAX_RUN_HOURS)),
        )


def flex_start_cannot_stop(s: Settings) -> None:
    """Google does not stop flex-start VMs (they run once, then are deleted): autostop's stop would be refused every
    poll while the VM bills on. Delete keeps what matters: the data disk and the checkpoint bucket outlive the VM.
    A slice is refused any autostop by slice_autostop."""
    if s.provisioning_model == "FLEX_START" and s.autostop == "stop" and not s.is_slice:
        raise ConfigError(
            stack_key("autostop"), "is stop, but Google cannot stop a FLEX_START VM, only delete it",
            "pulumi config set tpu-sft:autostop delete",
        )


# A MIG's base instance name numbered by hash signs is at most 52 characters before them (the Compute API's
# pattern for baseInstanceName: [a-z][-a-z0-9]{0,51}-#{1,10}); the slice's hosts are <instanceName>-01, -02, …
SLICE_NAME_MAX = 52
# The data disk is one VM's: a slice's hosts cannot share one read-write persistent disk, so a slice has none.
SINGLE_HOST_KEYS = ("dataDiskSizeGb", "dataDiskType")
_SINGLE_HOST_TYPES = "v6e-1, v6e-4 or v6e-8"


def slice_autostop(s: Settings) -> None:
    """Autostop stops or deletes the one VM it runs on, with a grant on that one instance (infra/autostop.py);
    a slice's hosts are made by a managed instance group, and one stopped host stalls the whole slice."""
    if s.is_slice and s.autostop != "off":
        raise ConfigError(
            stack_key("autostop"),
            f"{s.autostop} acts on one VM, and a {s.accelerator.name} slice is {s.accelerator.hosts} hosts in a "
            "managed instance group (autostop for slices is not built yet; tpu-sft:maxRunHours still caps each host)",
            f"pulumi config set tpu-sft:autostop off, or use tpu-sft:acceleratorType {_SINGLE_HOST_TYPES}",
        )


# Compute Engine names: RFC 1035, at most 63 characters (cloud.google.com/compute/docs/naming-resources).
COMPUTE_NAME_MAX = 63
# What Pulumi appends to the logical name of a resource declared without `name`: "-" and 7 random hex digits (written
# x here). Google receives the whole; pulumi-gcp's own limit, 255, never fires first (provider/resources.go
# `prov.SetAutonaming(255, "-")`; rehearsal/autonaming.py).
AUTO_NAME_SUFFIX = "-xxxxxxx"
_HOST_NUMBER = "-##"  # infra/slice.py HOST_NUMBER (it imports this module); tests/infra/test_names.py checks they agree


@dataclass(frozen=True)
class DerivedName:
    """A Compute Engine name the program derives from tpu-sft:instanceName, as Google receives it."""

    what: str
    name: str
    limit: int


def derived_names(s: Settings) -> tuple[DerivedName, ...]:
    """Every Compute Engine name the program derives from tpu-sft:instanceName (__main__.py, infra/disk.py,
    infra/network.py, infra/vm.py, infra/slice.py). tests/infra/test_names.py checks that this is exactly what the
    program declares, so the rule below and the program cannot drift apart."""
    n = s.instance_name

    def auto(what: str, logical_name: str) -> DerivedName:
        return DerivedName(f"{what} (auto-named: Pulumi adds '-' and 7 hex digits)", logical_name + AUTO_NAME_SUFFIX,
                           COMPUTE_NAME_MAX)

    firewalls = (auto("SSH firewall", f"{n}-ssh"), auto("SSH deny firewall", f"{n}-ssh-deny-other"))
    if not s.is_slice:
        return DerivedName("VM", n, COMPUTE_NAME_MAX), auto("data disk", f"{n}-data"), *firewalls
    group = (
        DerivedName("managed instance group", n, COMPUTE_NAME_MAX),
        DerivedName("group's numbered base instance name", n + _HOST_NUMBER, SLICE_NAME_MAX + len(_HOST_NUMBER)),
        auto("slice firewall", f"{n}-slice"), auto("workload policy", f"{n}-workload"),
        auto("instance template", f"{n}-template"),
    )
    resize_request = (auto("resize request", f"{n}-hosts"),) if s.provisioning_model == "FLEX_START" else ()
    return *firewalls, *group, *resize_request


def names_fit(s: Settings) -> None:
    """Google refuses a name over its limit with a 400 at the first `pulumi up`, after part of the stack exists."""
    names = derived_names(s)
    length = len(s.instance_name)
    fitting = min(d.limit - (len(d.name) - length) for d in names)
    if length > fitting:
        worst = max(names, key=lambda d: len(d.name) - d.limit)
        raise ConfigError(
            stack_key("instanceName"),
            f"is {length} characters, so the {worst.what} would be {worst.name!r}, {len(worst.name)} characters where "
            f"Google allows {worst.limit}; at most {fitting} fit",
            set_hint("instanceName", s.instance_name[:fitting].rstrip("-")),
        )


def slice_through_iap(s: Settings) -> None:
    """The tasks reach a slice's hosts by instance name through IAP (infra/tasks.py): the program declares the
    hosts' names, not their external addresses, which the managed instance group assigns."""
    if s.is_slice and s.access != "iap":
        raise ConfigError(
            stack_key("access"),
            f"{s.access} needs each host's external IP, and a {s.accelerator.name} slice's hosts get theirs from the "
            "managed instance group, which the program cannot name in advance",
            f"pulumi config set tpu-sft:access iap, or use tpu-sft:acceleratorType {_SINGLE_HOST_TYPES}",
        )


def slice_publish(s: Settings) -> None:
    """Publishing reads the kept model from a local directory (workload/publish.py); a slice keeps its model in
    the bucket (remote/profile.py slice_host)."""
    for key, value in (("publishGcsUri", s.publish_gcs_uri), ("publishHubRepo", s.publish_hub_repo)):
        if s.is_slice and value:
            raise ConfigError(
                stack_key(key),
                f"publishing from a {s.accelerator.name} slice is not built yet: a slice keeps its model in the "
                "checkpoint bucket, and publishing reads it from a host's disk",
                f"pulumi config rm {stack_key(key)}, or use tpu-sft:acceleratorType {_SINGLE_HOST_TYPES}",
            )


# Rules across keys, checked in this order once every key is valid on its own.
CROSS_KEY_RULES = (
    reservation_matches_model, direct_access_needs_external_ip, flex_start_needs_run_cap,
    flex_start_within_seven_days, flex_start_cannot_stop, slice_autostop, names_fit, slice_through_iap,
    slice_publish,
)


def single_host_keys_on_a_slice(s: Settings, given: frozenset[str]) -> None:
    """A key that only a single VM uses, set on a stack whose accelerator type is a slice."""
    for key in SINGLE_HOST_KEYS:
        if s.is_slice and key in given:
            raise ConfigError(
                stack_key(key),
                f"has no use on a {s.accelerator.name} slice: its hosts cannot share one read-write data disk, so "
                "a slice declares none (its kept model goes to the checkpoint bucket)",
                f"pulumi config rm {stack_key(key)}, or use tpu-sft:acceleratorType {_SINGLE_HOST_TYPES}",
            )


def _max_run_hours(raw: Any, pipeline: PipelineConfig) -> int | None:
    """The cap as set, None for "off" (flex_start_needs_run_cap refuses that for FLEX_START), or derived from the
    run's estimate (infra/run_cap.py) when unset."""
    if raw is None:
        run = estimate(ACCELERATORS[pipeline.accelerator_type].chips, PRICE_TABLE["v6e"]["usd_per_chip_hour"],
                       pipeline.steps, pipeline.per_device_batch_size)
        return default_max_run_hours(run)
    if raw == "off":
        return None
    return parse_int("maxRunHours", raw, minimum=1, example="4")


def from_pulumi() -> Settings:
    """The current stack's settings, from the config the engine handed this program.

    Read through `pulumi.runtime.config`, not `pulumi.Config`, on purpose: `pulumi.Config` can neither list the
    keys a stack sets (so a typo such as `tpu-sft:step` would pass silently) nor say synchronously which values
    are stored as secrets (so a token in plain text would pass too); both checks are tested under the mock
    engine (tests/infra/test_settings_errors.py). Only this function touches the runtime."""
    import pulumi
    from pulumi.runtime import config as runtime_config

    raw = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    secret_keys = frozenset(k for k in raw if runtime_config.is_config_secret(k))
    settings = parse(raw, stack=pulumi.get_stack(), secret_keys=secret_keys)
    is_update = not pulumi.runtime.is_dry_run()
    require_token_for_update(settings, is_update=is_update, environ=os.environ)
    require_private_key(settings.ssh_private_key_path, settings.ssh_public_key, is_update=is_update)
    publish_settings.require_write_token(settings.publish_hub_repo, settings.hf_write_token,
                                         is_update=is_update, environ=os.environ)
    return settings


def require_token_for_update(settings: Settings, *, is_update: bool, environ: Mapping[str, str]) -> None:
    """Gemma is gated: an update that would train without a token fails here, before anything is created,
    not at conversion time on a VM already billing. A preview needs none (CI previews have no token)."""
    if is_update and settings.pipeline.profile == "full" and not settings.hf_token and not environ.get("HF_TOKEN"):
        raise ConfigError(
            stack_key("hfToken"), "is not set and $HF_TOKEN is empty, but the Gemma weights are gated",
            "pulumi config set --secret tpu-sft:hfToken (or export HF_TOKEN before `pulumi up`)",
        )
