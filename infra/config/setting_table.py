"""The infrastructure settings as one table: one `Setting` row per `tpu-sft:` key, like the pipeline's
`workload/core/config.py` `SETTINGS`.

A row is the key, the `Settings` field it fills, how its raw value is parsed, an example for the fix in its
errors, and one line saying what it is. `infra/config/read_settings.py` `parse` runs the rows in this order (so
that, of two wrong keys, the same one is named first every time), derives the known keys from them and checks the
rules across keys afterwards; tests check `Pulumi.dev.yaml` against the table. How a setting flows on: ARCHITECTURE.md.
"""

from __future__ import annotations

import ipaddress
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from infra.config.ssh_key_trust import ACCESS_MODES, os_login_user
from infra.pricing.cost import ON_DEMAND, chip_price, estimate, seed_step_seconds
from infra.pricing.eval_cost import eval_hours
from infra.pricing.run_cap import capped_by_default, default_max_run_hours
from workload.core.accelerators import ACCELERATORS
from workload.core.config import (
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
from workload.eval import gate

PROVISIONING_MODELS = ("RESERVATION_BOUND", "SPOT", "FLEX_START", "STANDARD")
DEFAULT_PROVISIONING_MODEL = "RESERVATION_BOUND"  # as the seed's gcloud
ACCESS_PATHS = ("iap", "direct")  # how SSH reaches the VM: an IAP tunnel, or straight to its external IP
IAP_RANGE = "35.235.240.0/20"  # Google's IAP TCP-forwarding source range
DATA_DISK_TYPES = ("hyperdisk-balanced", "hyperdisk-ml")  # what v6e VMs can attach
RECOVERY_MODES = ("auto", "off")  # a managed instance group of one repairs the VM, or nothing does (docs/restarts.md)
# The models whose VM nothing brings back after a preemption or deletion (docs/restarts.md): the ones `auto` serves.
RECOVERED_MODELS = ("SPOT", "STANDARD")
AUTOSTOP_ACTIONS = ("delete", "off")  # what the VM does to itself once idle (workload/spend/autostop.py)
DEFAULT_PUBLIC_KEY = "~/.ssh/google_compute_engine.pub"  # the key `gcloud compute ssh` creates and uses
DEFAULT_INSTANCE_NAME = "tpu-sft"

# Matched whole (re.fullmatch, through parse_pattern), with ASCII classes only: the rule workload/core/config.py states.
PROJECT_ID = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]")
ZONE = re.compile(r"[a-z]+-[a-z]+[0-9]+-[a-z]")
_RESOURCE_NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
_RESERVATION = re.compile(r"(projects/[a-z][a-z0-9-]{4,28}[a-z0-9]/reservations/)?[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
_LABEL_KEY = re.compile(r"[a-z][a-z0-9_-]{0,62}")
_LABEL_VALUE = re.compile(r"[a-z0-9_-]{0,63}")
_NOT_IN_A_LABEL_VALUE = re.compile(r"[^a-z0-9_-]")
LABEL_VALUE_MAX = 63
_USER = re.compile(r"[a-z_][a-z0-9_-]{0,31}")
_ACCOUNT = re.compile(r"[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[A-Za-z]{2,}")
_SERVICE_ACCOUNT = re.compile(r"[a-z0-9][a-z0-9.-]{0,62}@[a-z0-9][a-z0-9.-]*\.gserviceaccount\.com")
# Cloud Storage bucket names without dots (dotted names need domain verification): 3-63 characters, not beginning
# with "goog", holding no "google" or close misspelling (cloud.google.com/storage/docs/buckets, "Bucket names").
_BUCKET = re.compile(r"[a-z0-9][a-z0-9_-]{1,61}[a-z0-9]")
_BUCKET_RESERVED = re.compile(r"goog.*|.*g[o0][o0]g[l1]e.*")
# One key on one line (a newline would smuggle a second key into the VM's ssh-keys metadata), comment optional.
_PUBLIC_KEY = re.compile(r"(ssh-(ed25519|rsa)|ecdsa-sha2-[A-Za-z0-9-]+) [A-Za-z0-9+/=]+( [^\r\n]*)?")
# The path may hold any character but whitespace: Unicode's \s, so that no other script's space gets through.
_GCS_URI = re.compile(r"gs://[a-z0-9][a-z0-9._-]{1,221}[a-z0-9](/[^\s]*)?")
# \w as the Hugging Face Hub client's own repo-id check has it (Unicode letters and digits too): kept as it was.
_HUB_REPO = re.compile(r"[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*")


@dataclass(frozen=True)
class Given:
    """What a row's parser may read besides its own raw value: the stack, its project and pipeline settings, the
    keys stored as secrets, and what the rows before it parsed (by key; a key not set is absent)."""

    stack: str
    project: str
    pipeline: PipelineConfig
    secret_keys: frozenset[str]
    parsed: Mapping[str, Any]


Parser = Callable[[str, Any, str, Given], Any]


@dataclass(frozen=True)
class Setting:
    """One infrastructure setting: its stack key (without the namespace) and the `Settings` field it fills (None:
    checked here, read elsewhere), how a raw value is parsed (key, raw, example, what was given → value, or
    ConfigError; None leaves the field's default), an example for the fix in its errors, what it is in one line,
    and whether it is parsed when unset too (raw None: its parser then derives a value or refuses the gap)."""

    key: str
    field: str | None
    parse: Parser
    example: str
    description: str
    when_unset: bool = False


def _int(minimum: int) -> Parser:
    return lambda key, raw, example, given: parse_int(key, raw, minimum=minimum, example=example)


def _pattern(pattern: re.Pattern[str], what: str) -> Parser:
    return lambda key, raw, example, given: parse_pattern(key, raw, pattern, what, example)


def _choice(choices: tuple[str, ...]) -> Parser:
    return lambda key, raw, example, given: parse_choice(key, raw, choices)


def _autostop(key: str, raw: Any, example: str, given: Given) -> str:
    """delete or off. Not stop, which this program once offered: Compute Engine cannot restart a TPU VM once stopped
    (Google's pages: docs/checkpoints.md, "What survives what"), and every machine type here is a ct6e, so a stopped
    VM would bill its disks and never run again. A stack that still says stop is told why, not just the choices."""
    if raw == "stop":
        raise ConfigError(
            stack_key(key),
            "stop: Compute Engine cannot restart a stopped TPU VM (ct6e), so the next `pulumi up` could not start it",
            f"{set_hint(key, 'delete')} (the data disk and the checkpoint bucket stay; the next `pulumi up` makes a "
            "new VM)",
        )
    return parse_choice(key, raw, AUTOSTOP_ACTIONS)


def _recovery(key: str, raw: Any, example: str, given: Given) -> str:
    """auto or off. `auto` set by hand where no group of one can serve is refused, not ignored: a RESERVATION_BOUND VM
    ends with its reservation and Google restarts it after a failure itself; Google's flex-start VMs "cannot be
    stopped, suspended or recreated" (the provisioning-models page); a slice's recovery is not built
    (docs/restarts.md). Left unset, `auto` applies where it can and nothing else changes."""
    mode = parse_choice(key, raw, RECOVERY_MODES)
    model = given.parsed.get("provisioningModel", DEFAULT_PROVISIONING_MODEL)
    if mode == "auto" and ACCELERATORS[given.pipeline.accelerator_type].is_slice:
        raise ConfigError(
            stack_key(key),
            "auto cannot apply to a slice: Google does not recover a Spot slice, and tpu-sft does not yet "
            "(docs/restarts.md)",
            f"pulumi config rm {stack_key(key)}, or {set_hint(key, 'off')}",
        )
    if mode == "auto" and model not in RECOVERED_MODELS:
        raise ConfigError(
            stack_key(key),
            f"auto cannot apply to a {model} VM (only SPOT and STANDARD VMs are recreated by a managed instance "
            "group; docs/restarts.md says why)",
            f"pulumi config rm {stack_key(key)}, or {set_hint(key, 'off')}",
        )
    return mode


def _float(key: str, raw: Any, example: str, given: Given) -> float:
    return parse_float(key, raw, example=example)


def _bool(key: str, raw: Any, example: str, given: Given) -> bool:
    return parse_bool(key, raw)


def _secret(key: str, raw: Any, example: str, given: Given) -> str:
    """A token setting: accepted only as a Pulumi secret, never in plain text."""
    if stack_key(key) not in given.secret_keys:
        raise ConfigError(
            stack_key(key),
            "is stored in plain text",
            f"pulumi config rm {stack_key(key)} && pulumi config set --secret {stack_key(key)} <token>",
        )
    return raw


def _cidrs(key: str, raw: Any, example: str, given: Given) -> tuple[str, ...]:
    # The default is checked like a listed range, so a default that opened SSH to the internet would be refused.
    ranges = parse_list(key, [IAP_RANGE] if raw is None else raw, example)
    if not ranges:
        raise ConfigError(stack_key(key), "is empty, so nothing could reach the VM", set_hint(key, f"'{example}'"))
    for cidr in ranges:
        try:
            if not isinstance(cidr, str) or not cidr.isascii():  # ip_network(5) is 0.0.0.5/32
                raise TypeError(cidr)
            network = ipaddress.ip_network(cidr, strict=True)
        except (TypeError, ValueError):
            raise ConfigError(
                stack_key(key), f"{cidr!r} is not a CIDR range like 203.0.113.0/24", set_hint(key, f"'{example}'")
            ) from None
        if network.prefixlen == 0 and not given.parsed.get("dangerouslyAllowSshFromAnywhere", False):
            raise ConfigError(
                stack_key(key),
                f"{cidr} opens SSH to the whole internet",
                "list your own ranges, or set tpu-sft:dangerouslyAllowSshFromAnywhere true if you really mean it",
            )
    return tuple(ranges)


def stack_label(stack: str) -> str:
    """The stack's name as a label value Google accepts (labeling-resources: lower-case letters, digits, '_' and
    '-', at most 63): Pulumi allows '.' and capitals in a stack's name, and any length."""
    return _NOT_IN_A_LABEL_VALUE.sub("_", stack.lower())[:LABEL_VALUE_MAX]


def _labels(key: str, raw: Any, example: str, given: Given) -> tuple[tuple[str, str], ...]:
    labels = {"app": "tpu-sft", "stack": stack_label(given.stack)}
    if raw is not None:
        given_labels = parse_structured(key, raw, dict, example)
        for k, v in given_labels.items():
            if not _LABEL_KEY.fullmatch(str(k)) or not isinstance(v, str) or not _LABEL_VALUE.fullmatch(v):
                raise ConfigError(
                    stack_key(key),
                    f"label {k}={v!r} is not valid (lower-case letters, digits, '_' and '-'; keys start with a letter)",
                    "pulumi config set --path tpu-sft:labels.owner my-team",
                )
        labels.update(given_labels)
    return tuple(sorted(labels.items()))


def _ssh_access(key: str, raw: Any, example: str, given: Given) -> str:
    return parse_choice(key, raw or "metadata", ACCESS_MODES)  # an empty value, like none, means metadata


def _os_login_account(key: str, raw: Any, example: str, given: Given) -> str | None:
    """The Google account whose OS Login profile holds the key: required with tpu-sft:sshAccess oslogin, refused
    without it."""
    if given.parsed.get("sshAccess", "metadata") != "oslogin":
        if raw is not None:
            raise ConfigError(
                stack_key(key),
                "is only used with tpu-sft:sshAccess oslogin",
                "pulumi config rm tpu-sft:osLoginAccount, or pulumi config set tpu-sft:sshAccess oslogin",
            )
        return None
    if raw is None:
        raise ConfigError(
            stack_key(key),
            "is required with tpu-sft:sshAccess oslogin: the key is registered to it",
            'pulumi config set tpu-sft:osLoginAccount "$(gcloud config get account)"',
        )
    return parse_pattern(key, raw, _ACCOUNT, "a Google account e-mail", example)


def _ssh_user(key: str, raw: Any, example: str, given: Given) -> str | None:
    """As set; unset, with OS Login the POSIX name Google gives the account, else the default."""
    if raw is not None:
        return parse_pattern(key, raw, _USER, "a Linux user name", example)
    account = given.parsed.get("osLoginAccount")
    if account is None:
        return None
    user = os_login_user(account)
    if user is None:
        raise ConfigError(
            stack_key(key),
            f"cannot be derived from {account} (a service account, or a name over 32 characters)",
            "pulumi config set tpu-sft:sshUser <its POSIX name: gcloud compute os-login describe-profile>",
        )
    return user


def _public_key_path(key: str, raw: Any, example: str, given: Given) -> str:
    if not isinstance(raw, str) or not raw.endswith(".pub") or raw == ".pub":
        raise ConfigError(
            stack_key(key),
            f"expected the path of a public key file (.pub), got {raw!r}; "
            "its private key is the same path without .pub",
            set_hint(key, example),
        )
    return raw


def _public_key(key: str, raw: Any, example: str, given: Given) -> str:
    if raw is None:
        raise ConfigError(
            stack_key(key),
            "is not set; the VM's SSH key must come from the stack, not from the machine that runs pulumi",
            f"pulumi config set {stack_key(key)} {example}",
        )
    return parse_pattern(key, raw, _PUBLIC_KEY, "an OpenSSH public key", example)


def _max_run_hours(key: str, raw: Any, example: str, given: Given) -> int | None:
    """The cap as set, None for "off" (flex_start_needs_run_cap refuses that for FLEX_START), or, when unset, none for
    RESERVATION_BOUND and derived from the run's estimate for the others (infra/pricing/run_cap.py)."""
    if raw is None and not capped_by_default(given.parsed.get("provisioningModel", DEFAULT_PROVISIONING_MODEL)):
        return None
    if raw is None:
        pipeline = given.pipeline
        run = estimate(
            ACCELERATORS[pipeline.accelerator_type].chips,
            chip_price(ON_DEMAND, None).usd_per_chip_hour,  # the hours are what count here, not the price
            pipeline.steps,
            seed_step_seconds(pipeline.per_device_batch_size),  # not a prediction: infra/pricing/cost.py says why
            eval_hours(pipeline),  # the VM must outlive the eval too
        )
        return default_max_run_hours(run)
    if raw == "off":
        return None
    return parse_int(key, raw, minimum=1, example=example)


def _checkpoint_bucket(key: str, raw: Any, example: str, given: Given) -> str:
    """The given name, or one derived from the project id (globally unique) and the instance name."""
    project = given.project
    if raw is not None:
        name = parse_pattern(key, raw, _BUCKET, "a bucket name (3-63 of a-z, 0-9, '-', '_')", f"{project}-tpu-sft-runs")
        _not_reserved_by_google(name, f"{project}-tpu-sft-runs")
        return name
    name = f"{project}-{given.parsed.get('instanceName') or DEFAULT_INSTANCE_NAME}-runs"
    if not _BUCKET.fullmatch(name):
        raise ConfigError(
            stack_key(key),
            f"the derived bucket name {name!r} is longer than 63 characters",
            set_hint(key, f"{project[:40]}-runs"),
        )
    _not_reserved_by_google(name, f"{project}-tpu-sft-runs")
    return name


def _not_reserved_by_google(bucket: str, example: str) -> None:
    """Cloud Storage keeps "goog…" and "google" (and its look-alikes) for Google's own buckets."""
    if _BUCKET_RESERVED.fullmatch(bucket):
        raise ConfigError(
            stack_key("checkpointBucket"),
            f'{bucket!r} begins with "goog" or contains "google", which Cloud Storage reserves',
            set_hint("checkpointBucket", example),
        )


def _eval_margin(key: str, raw: Any, example: str, given: Given) -> float:
    """Points of a benchmark's score (0.78 is 78 points): from 0 (any real drop blocks) to 100 (nothing does)."""
    margin = parse_float(key, raw, example=example, zero=True)
    low, high = gate.MARGIN_RANGE
    if not low <= margin <= high:
        raise ConfigError(
            stack_key(key), f"is {margin:g} points, but a score moves {high:g} points at most", set_hint(key, example)
        )
    return margin


_RESOURCE = _pattern(_RESOURCE_NAME, "a Compute Engine resource name")

# In the order they are parsed: a row may read the rows before it (Given.parsed).
SETTINGS: tuple[Setting, ...] = (
    Setting(
        "provisioningModel",
        "provisioning_model",
        _choice(PROVISIONING_MODELS),
        "RESERVATION_BOUND",
        "how the VM is provisioned: a calendar-mode reservation, SPOT, FLEX_START or STANDARD",
    ),
    Setting(
        "reservation",
        "reservation",
        _pattern(_RESERVATION, "a reservation name"),
        "my-v6e-reservation",
        "the reservation the VM consumes (RESERVATION_BOUND, or STANDARD with an ordinary one)",
    ),
    Setting(
        "instanceName",
        "instance_name",
        _RESOURCE,
        "tpu-sft",
        "the VM's name (a slice's group and hosts'), from which every other resource's name is derived",
    ),
    Setting("network", "network", _RESOURCE, "tpu-sft", "the VPC network the VM joins"),
    Setting("subnetwork", "subnetwork", _RESOURCE, "tpu-sft", "the subnetwork the VM joins (unset: the network's)"),
    Setting("bootDiskSizeGb", "boot_disk_size_gb", _int(100), "200", "the boot disk's size in GB"),
    Setting(
        "dataDiskSizeGb",
        "data_disk_size_gb",
        _int(10),
        "100",
        "the data disk's size in GB (it keeps the model after the VM is gone; one VM only)",
    ),
    Setting(
        "dataDiskType",
        "data_disk_type",
        _choice(DATA_DISK_TYPES),
        "hyperdisk-balanced",
        "the data disk's type (what a v6e VM can attach)",
    ),
    Setting(
        "keepDataDisk",
        "keep_data_disk",
        _bool,
        "false",
        "whether `pulumi destroy` leaves the data disk and the checkpoint bucket behind (default: it deletes both)",
    ),
    Setting(
        "allowDataDiskReplace",
        None,
        _bool,
        "false",
        "whether the policy pack lets a change replace the data disk (policy/disk.py reads it)",
    ),
    Setting(
        "allowBucketReplace",
        None,
        _bool,
        "false",
        "whether the policy pack lets a change replace (and so empty) the checkpoint bucket (policy/bucket.py)",
    ),
    Setting(
        "access",
        "access",
        _choice(ACCESS_PATHS),
        "iap",
        "how SSH reaches the VM: through an IAP tunnel, or direct to its external IP",
    ),
    Setting(
        "externalIp",
        "external_ip",
        _bool,
        "true",
        "whether the VM has an external IP (egress for its installs; false needs Cloud NAT)",
    ),
    Setting(
        "dangerouslyAllowSshFromAnywhere",
        None,
        _bool,
        "false",
        "whether tpu-sft:sshSourceRanges may open SSH to the whole internet",
    ),
    Setting(
        "sshSourceRanges",
        "ssh_source_ranges",
        _cidrs,
        f'["{IAP_RANGE}"]',
        "the CIDR ranges the SSH firewall admits (default: IAP's)",
        when_unset=True,
    ),
    Setting(
        "sshAccess",
        "ssh_access",
        _ssh_access,
        "metadata",
        "how the VM trusts the stack's key: its ssh-keys metadata, or OS Login",
    ),
    Setting(
        "osLoginAccount",
        "os_login_account",
        _os_login_account,
        "me@example.com",
        "with OS Login, the Google account whose login profile holds the key",
        when_unset=True,
    ),
    Setting(
        "sshUser",
        "ssh_user",
        _ssh_user,
        "tpu-sft",
        "the user the tasks log in as (with OS Login: the account's POSIX name)",
        when_unset=True,
    ),
    Setting(
        "sshPublicKeyPath",
        "ssh_public_key_path",
        _public_key_path,
        DEFAULT_PUBLIC_KEY,
        "where the stack's public key is on the machine that runs `pulumi up` (its private half: without .pub)",
    ),
    Setting(
        "sshPublicKey",
        "ssh_public_key",
        _public_key,
        f'"$(cat {DEFAULT_PUBLIC_KEY})"',
        "the stack's one SSH public key, the one the VM trusts",
        when_unset=True,
    ),
    Setting(
        "labels",
        "labels",
        _labels,
        '{"owner": "me"}',
        "labels on every billable resource (app and stack are always added)",
        when_unset=True,
    ),
    Setting(
        "pricePerChipHour",
        "price_per_chip_hour",
        _float,
        "2.70",
        "the list price of one chip-hour in USD, for the cost outputs",
    ),
    Setting(
        "diskPricePerGbMonth",
        "disk_price_per_gb_month",
        _float,
        "0.08",
        "USD per GB-month of the disks, for the cost outputs "
        "(unset: infra/pricing/cost.py's list price of each disk's type)",
    ),
    Setting(
        "storagePricePerGbMonth",
        "storage_price_per_gb_month",
        _float,
        "0.020",
        "USD per GB-month of the checkpoint bucket's Standard storage, for the cost outputs",
    ),
    Setting(
        "maxRunHours",
        "max_run_hours",
        _max_run_hours,
        "4",
        "hours after each start at which Google deletes the VM (unset: none for RESERVATION_BOUND, else derived from "
        "the run; off: none)",
        when_unset=True,
    ),
    Setting(
        "autostop",
        "autostop",
        _autostop,
        "delete",
        "what the VM does to itself once idle: delete (the data disk and the bucket stay), or off",
    ),
    Setting("idleMinutes", "idle_minutes", _int(1), "30", "the quiet minutes after which autostop acts"),
    Setting(
        "recovery",
        "recovery",
        _recovery,
        "auto",
        "auto: a SPOT or STANDARD VM in a managed instance group of one, recreated with its name and data disk after a "
        "preemption or deletion; off: a plain VM",
    ),
    Setting(
        "bootResumes",
        "boot_resumes",
        _int(0),
        "3",
        "boot-resumes of a run Google's restart ended, at most, without a newer checkpoint (0: none; docs/restarts.md)",
    ),
    Setting(
        "serviceAccount",
        "service_account",
        _pattern(_SERVICE_ACCOUNT, "a service account e-mail"),
        "tpu-sft-vm@my-project.iam.gserviceaccount.com",
        "the VM's service account (unset: the project's default compute account)",
    ),
    Setting(
        "checkpointBucket",
        "checkpoint_bucket",
        _checkpoint_bucket,
        "my-project-tpu-sft-runs",
        "the checkpoint bucket's name (unset: <project>-<instanceName>-runs)",
        when_unset=True,
    ),
    Setting(
        "checkpointRetentionDays",
        "checkpoint_retention_days",
        _int(1),
        "30",
        "days after which the bucket deletes checkpoints under runs/",
    ),
    Setting(
        "keepCheckpointBucket",
        "keep_checkpoint_bucket",
        _bool,
        "false",
        "whether `pulumi destroy` leaves the checkpoint bucket behind (default: it empties and deletes it)",
    ),
    Setting(
        "hfToken",
        "hf_token",
        _secret,
        "<token>",
        "the Hugging Face token (Gemma is gated), a secret (unset: $HF_TOKEN of the shell)",
    ),
    Setting(
        "publishGcsUri",
        "publish_gcs_uri",
        _pattern(_GCS_URI, "a gs://BUCKET/PATH address"),
        "gs://my-bucket/models/gemma-sft",
        "where to publish the kept model in Cloud Storage (opt-in)",
    ),
    Setting(
        "publishHubRepo",
        "publish_hub_repo",
        _pattern(_HUB_REPO, "a Hub repo id (OWNER/NAME)"),
        "my-org/gemma3-4b-sft",
        "the Hugging Face Hub repo to publish the kept model to (opt-in)",
    ),
    Setting(
        "publishHubAdapterRepo",
        "publish_hub_adapter_repo",
        _pattern(_HUB_REPO, "a Hub repo id (OWNER/NAME)"),
        "my-org/gemma3-4b-sft-lora",
        "a Hub repo to publish a LoRA or QLoRA run's adapter to, alone at its root (opt-in; not with tuning full)",
    ),
    Setting("publishHubPublic", "publish_hub_public", _bool, "false", "whether those Hub repos are public"),
    Setting(
        "evalGate",
        "eval_gate",
        _choice(gate.MODES),
        gate.DEFAULT_MODE,
        "what publishing does with a fine-tune its eval finds worse than the base beyond evalMargin: block, warn "
        "(publish and say so) or off (docs/publishing.md)",
    ),
    Setting(
        "evalMargin",
        "eval_margin",
        _eval_margin,
        f"{gate.DEFAULT_MARGIN_POINTS:g}",
        "the drop in a benchmark's score, in points, that the eval gate lets through",
    ),
    Setting(
        "hfWriteToken",
        "hf_write_token",
        _secret,
        "<token>",
        "a Hugging Face token with write access, for publishing, a secret (unset: $HF_WRITE_TOKEN)",
    ),
)
BY_KEY = {s.key: s for s in SETTINGS}

# Keys this program no longer reads, each with why and what to run instead: `parse` refuses them by name, since a
# stack file copied before the change still holds them and "not a tpu-sft setting (a typo?)" would not say what
# became of it.
RETIRED = {
    "bucketForceDestroy": (
        "is no longer a setting: `pulumi destroy` now empties and deletes the checkpoint bucket unless "
        "tpu-sft:keepCheckpointBucket or tpu-sft:keepDataDisk is true",
        "pulumi config rm tpu-sft:bucketForceDestroy (and, to keep the bucket, "
        "pulumi config set tpu-sft:keepCheckpointBucket true)",
    ),
}
