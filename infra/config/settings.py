"""Every stack setting, read once and validated before any resource is declared.

`parse` is pure (a mapping of stack keys to raw values in, a frozen `Settings` out) so that any config can be
checked without an engine; `from_pulumi` feeds it the stack's config, and infra/stack.py takes that on to the
settings the program uses (`perDeviceBatchSize auto` and local data resolved). Each `tpu-sft:` key is one row of
`infra/config/setting_table.py` (the pipeline's of `workload/core/config.py`); the rules across keys are the named
functions of `CROSS_KEY_RULES` and `SLICE_RULES` here. Errors are `ConfigError`: one line naming the key, the problem
and the fix. How a setting reaches the VM: ARCHITECTURE.md.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from typing import Any, Mapping

from infra.config.data_size import EpochSize, epochs_as_tokens
from infra.config.local_data import Upload
from infra.config.setting_table import (
    BY_KEY,
    DEFAULT_INSTANCE_NAME,
    DEFAULT_PUBLIC_KEY,
    IAP_RANGE,
    RETIRED,
    SETTINGS,
    Given,
)
from infra.config.ssh_key_pair import require_private_key
from infra.pricing.cost import STORAGE_USD_PER_GB_MONTH, ChipPrice, chip_price
from workload.core import lock
from workload.core.accelerators import ACCELERATORS, Accelerator
from workload.core.config import BY_KEY as PIPELINE_SETTINGS
from workload.core.config import NAMESPACE, ConfigError, PipelineConfig, parse_pattern, set_hint, stack_key

IMAGE = "ubuntu-os-accelerator-images/ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e"
# Consuming an ordinary (on-demand) specific reservation: STANDARD; RESERVATION_BOUND consumes a calendar-mode
# (future) reservation. Spot and flex-start VMs consume none.
RESERVATION_MODELS = ("RESERVATION_BOUND", "STANDARD")
# Matched whole (re.fullmatch, through parse_pattern), with ASCII classes only, like the table's patterns.
_PROJECT = re.compile(r"[a-z][a-z0-9-]{4,28}[a-z0-9]")
_ZONE = re.compile(r"[a-z]+-[a-z]+[0-9]+-[a-z]")
# A Hugging Face access token, searched for inside every value: never allowed in a plain (non-secret) setting.
_HF_TOKEN = re.compile(r"hf_[A-Za-z0-9]{20,}")
AUTO_BATCH_KEY, AUTO = "perDeviceBatchSize", "auto"  # the largest batch a sweep found (infra/preflight/batch_sweep.py)


@dataclass(frozen=True)
class Settings:
    project: str
    zone: str
    stack: str
    pipeline: PipelineConfig
    accelerator: Accelerator
    reservation: str | None = None
    provisioning_model: str = "RESERVATION_BOUND"
    instance_name: str = DEFAULT_INSTANCE_NAME
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
    price_per_chip_hour: float | None = (
        None  # None: infra/pricing/cost.py's price for the provisioning model (tpu_price)
    )
    disk_price_per_gb_month: float | None = None  # None: each disk type's list price (infra/pricing/cost.py)
    storage_price_per_gb_month: float = STORAGE_USD_PER_GB_MONTH
    max_run_hours: int | None = None  # None: no cap (tpu-sft:maxRunHours off); unset, parse() derives one
    hf_token: str | None = field(default=None, repr=False)  # only ever handed on as a Pulumi secret
    service_account: str | None = None  # the VM's service account; None: the project's default compute one
    checkpoint_bucket: str = ""  # "" until parse derives it from the project and instance name
    checkpoint_retention_days: int = 30
    keep_checkpoint_bucket: bool = False
    ssh_access: str = (
        "metadata"  # how the VM trusts the key: ssh-keys metadata, or OS Login (infra/config/ssh_key_trust.py)
    )
    os_login_account: str | None = None  # oslogin: the Google account whose login profile holds the key
    autostop: str = "delete"  # not stop: Compute Engine cannot restart a stopped TPU VM (infra/config/setting_table.py)
    idle_minutes: int = 30
    publish_gcs_uri: str | None = None  # publishing is opt-in: nothing unless a destination is set
    publish_hub_repo: str | None = None
    publish_hub_public: bool = False
    hf_write_token: str | None = field(default=None, repr=False)  # only ever handed on as a Pulumi secret
    warnings: tuple[str, ...] = ()  # one line each, shown by `pulumi preview`/`up` (from_pulumi)
    epoch: EpochSize | None = None  # what tpu-sft:epochs, now the pipeline's tokens, was counted in (from_pulumi)
    # perDeviceBatchSize auto, not yet taken from a sweep: the pipeline holds the sweep's starting batch until
    # infra/preflight/compile_step.py `take_the_sweeps_batch` puts in the batch a sweep found (reading its record).
    batch_auto: bool = False
    # perDeviceBatchSize auto, taken: the configuration the sweep chose and the runner-up, in words (the preview's
    # `sweepChoice`); None for a batch set by hand.
    sweep_choice: dict[str, str | None] | None = None
    # A local dataset's or chat template's copies in the checkpoint bucket, which the pipeline names by their URLs
    # once infra/stack.py has resolved it (infra/config/local_data.py; declared by infra/resources/data_access.py).
    data_uploads: tuple[Upload, ...] = ()

    @property
    def is_slice(self) -> bool:
        """A multi-host slice (tpu-sft:acceleratorType v6e-16 and up): a managed instance group, not one VM."""
        return self.accelerator.is_slice

    @property
    def tpu_price(self) -> ChipPrice:
        """The chip-hour price every estimate and the VM's own bill use, and the basis each names."""
        return chip_price(self.provisioning_model, self.price_per_chip_hour)

    @property
    def keeps_bucket(self) -> bool:
        """Whether `pulumi destroy` leaves the checkpoint bucket: asked for, or with keepDataDisk, which has always
        kept it too (and on a slice it is where the kept model is)."""
        return self.keep_checkpoint_bucket or self.keep_data_disk

    @property
    def publishes(self) -> bool:
        return bool(self.publish_gcs_uri or self.publish_hub_repo)

    @property
    def publish_destinations(self) -> dict[str, Any]:
        """Where the publish task sends the model: one of its inputs (infra/resources/publish.py), and a row of the
        plan."""
        return {"gcs": self.publish_gcs_uri, "hub": self.publish_hub_repo, "public": self.publish_hub_public}

    @property
    def ssh_private_key_path(self) -> str:
        return self.ssh_public_key_path.removesuffix(".pub")


def _secret_key(key: str) -> str:
    """Where a token found in plain text belongs: its own key if it is a token setting, else tpu-sft:hfToken."""
    return key if key.endswith("Token") else stack_key("hfToken")


def refuse_tokens_in_plain_text(raw: Mapping[str, Any], secret_keys: frozenset[str]) -> None:
    """A value of any key, ours or not, that holds a Hugging Face token and is not stored as a secret."""
    for key, value in raw.items():
        if key not in secret_keys and isinstance(value, str) and _HF_TOKEN.search(value):
            raise ConfigError(
                key,
                "holds what looks like a Hugging Face token in plain text",
                f"remove it and run `pulumi config set --secret {_secret_key(key)}` instead",
            )


def parse(
    raw: Mapping[str, Any],
    *,
    stack: str,
    secret_keys: frozenset[str] = frozenset(),
) -> Settings:
    """Validate a stack's config, given as fully qualified keys (`gcp:zone`, `tpu-sft:steps`) to raw values.
    Reads no file: the same config gives the same settings on every machine."""
    refuse_tokens_in_plain_text(raw, secret_keys)
    ours = {k.split(":", 1)[1]: v for k, v in raw.items() if k.startswith(f"{NAMESPACE}:")}
    retired = sorted(set(ours) & set(RETIRED))
    if retired:
        raise ConfigError(stack_key(retired[0]), *RETIRED[retired[0]])
    unknown = sorted(set(ours) - set(PIPELINE_SETTINGS) - set(BY_KEY))
    if unknown:
        raise ConfigError(
            stack_key(unknown[0]),
            "is not a tpu-sft setting (a typo?)",
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

    pipeline_raw = {k: v for k, v in ours.items() if k in PIPELINE_SETTINGS}
    batch_auto = pipeline_raw.get(AUTO_BATCH_KEY) == AUTO
    if batch_auto:
        pipeline_raw[AUTO_BATCH_KEY] = PipelineConfig.per_device_batch_size  # the sweep starts at the seed's batch
    pipeline = PipelineConfig.from_mapping(pipeline_raw)
    parsed: dict[str, Any] = {}
    given = Given(stack=stack, project=project, pipeline=pipeline, secret_keys=secret_keys, parsed=parsed)
    values: dict[str, Any] = {}
    for row in SETTINGS:
        value = ours.get(row.key)
        if value is None and not row.when_unset:
            continue
        value = row.parse(row.key, value, row.example, given)
        if value is None:
            continue
        parsed[row.key] = value
        if row.field is not None:
            values[row.field] = value

    settings = Settings(
        project=project,
        zone=zone,
        stack=stack,
        pipeline=pipeline,
        accelerator=ACCELERATORS[pipeline.accelerator_type],
        batch_auto=batch_auto,
        **values,
    )
    for rule in CROSS_KEY_RULES:
        rule(settings)
    fits_a_slice(settings)
    warnings = tuple(
        w for w in (single_host_keys_on_a_slice(settings, frozenset(ours)), untested_trainer(settings)) if w
    )
    return replace(settings, warnings=warnings) if warnings else settings


def reservation_matches_model(s: Settings) -> None:
    """A RESERVATION_BOUND VM names its (calendar-mode) reservation; a STANDARD one may name an ordinary one;
    SPOT and FLEX_START VMs consume none."""
    if s.provisioning_model == "RESERVATION_BOUND" and not s.reservation:
        raise ConfigError(
            stack_key("reservation"),
            "is required when provisioningModel is RESERVATION_BOUND",
            f"{set_hint('reservation', '<your reservation name>')}, or choose another tpu-sft:provisioningModel",
        )
    if s.provisioning_model not in RESERVATION_MODELS and s.reservation:
        raise ConfigError(
            stack_key("reservation"),
            f"cannot be consumed by a {s.provisioning_model} VM",
            "pulumi config rm tpu-sft:reservation, or set tpu-sft:provisioningModel STANDARD (an ordinary "
            "reservation) or RESERVATION_BOUND (a calendar-mode one)",
        )


def direct_access_needs_external_ip(s: Settings) -> None:
    if s.access == "direct" and not s.external_ip:
        raise ConfigError(
            stack_key("externalIp"),
            "is false, but tpu-sft:access direct needs the VM's external IP",
            "pulumi config set tpu-sft:access iap, or pulumi config set tpu-sft:externalIp true",
        )


def flex_start_needs_run_cap(s: Settings) -> None:
    if s.provisioning_model == "FLEX_START" and s.max_run_hours is None:
        raise ConfigError(
            stack_key("maxRunHours"),
            "is required for FLEX_START VMs (Google caps their run time)",
            set_hint("maxRunHours", "4"),
        )


# Flex-start VMs run "for up to seven days", a run duration of at most 604800 s
# (cloud.google.com/compute/docs/instance-groups/about-resize-requests-mig).
FLEX_START_MAX_RUN_HOURS = 7 * 24


def flex_start_within_seven_days(s: Settings) -> None:
    if s.provisioning_model == "FLEX_START" and s.max_run_hours and s.max_run_hours > FLEX_START_MAX_RUN_HOURS:
        raise ConfigError(
            stack_key("maxRunHours"),
            f"is {s.max_run_hours}, but FLEX_START VMs run for at most {FLEX_START_MAX_RUN_HOURS} hours (seven days)",
            set_hint("maxRunHours", str(FLEX_START_MAX_RUN_HOURS)),
        )


# A MIG's base instance name numbered by hash signs is at most 52 characters before them (the Compute API's
# pattern for baseInstanceName: [a-z][-a-z0-9]{0,51}-#{1,10}); the slice's hosts are <instanceName>-01, -02, …
SLICE_NAME_MAX = 52
# The data disk is one VM's: a slice's hosts cannot share one read-write persistent disk, so a slice has none.
SINGLE_HOST_KEYS = ("dataDiskSizeGb", "dataDiskType")
_OR_ONE_VM = ", or use tpu-sft:acceleratorType v6e-1, v6e-4 or v6e-8"


def slice_autostop(s: Settings) -> None:
    """A slice's autostop resizes its group to 0 and the next `pulumi up` sets the size back
    (workload/spend/autostop.py). A flex-start group's size is left to its first task, which fills it
    (infra/resources/slice.py ignore_changes), and its hosts' ids are no input of the tasks (they are made after they
    would be read): nothing in the next `pulumi up` would see the hosts gone and fill the group again. Its hosts end
    with their run cap instead."""
    if s.is_slice and s.autostop != "off" and s.provisioning_model == "FLEX_START":
        raise ConfigError(
            stack_key("autostop"),
            f"{s.autostop} would resize a FLEX_START slice's group to 0, and the next `pulumi up` would not fill it "
            "again (its hosts are made once, by its first task, and end with tpu-sft:maxRunHours)",
            f"pulumi config set tpu-sft:autostop off{_OR_ONE_VM}",
        )


# Compute Engine names: RFC 1035, at most 63 characters (cloud.google.com/compute/docs/naming-resources).
COMPUTE_NAME_MAX = 63
# What Pulumi appends to the logical name of a resource declared without `name`: "-" and 7 random hex digits (written
# x here). Google receives the whole; pulumi-gcp's own limit, 255, never fires first (provider/resources.go
# `prov.SetAutonaming(255, "-")`; rehearsal/autonaming.py).
AUTO_NAME_SUFFIX = "-xxxxxxx"
# infra/resources/slice.py HOST_NUMBER (it imports this module); tests/infra/config/test_names.py checks they agree
_HOST_NUMBER = "-##"


@dataclass(frozen=True)
class DerivedName:
    """A Compute Engine name the program derives from tpu-sft:instanceName, as Google receives it."""

    what: str
    name: str
    limit: int


def derived_names(s: Settings) -> tuple[DerivedName, ...]:
    """Every Compute Engine name the program derives from tpu-sft:instanceName (infra/resources/machine.py,
    infra/resources/disk.py, infra/resources/network.py, infra/resources/vm.py, infra/resources/slice.py).
    tests/infra/config/test_names.py checks that this is exactly what the program declares, so the rule below and the
    program cannot drift apart."""
    n = s.instance_name

    def auto(what: str, logical_name: str) -> DerivedName:
        return DerivedName(
            f"{what} (auto-named: Pulumi adds '-' and 7 hex digits)", logical_name + AUTO_NAME_SUFFIX, COMPUTE_NAME_MAX
        )

    firewalls = (auto("SSH firewall", f"{n}-ssh"), auto("SSH deny firewall", f"{n}-ssh-deny-other"))
    if not s.is_slice:
        return DerivedName("VM", n, COMPUTE_NAME_MAX), auto("data disk", f"{n}-data"), *firewalls
    group = (
        DerivedName("managed instance group", n, COMPUTE_NAME_MAX),
        DerivedName("group's numbered base instance name", n + _HOST_NUMBER, SLICE_NAME_MAX + len(_HOST_NUMBER)),
        auto("slice firewall", f"{n}-slice"),
        auto("workload policy", f"{n}-workload"),
        auto("instance template", f"{n}-template"),
    )
    return *firewalls, *group


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
    """The tasks reach a slice's hosts by instance name through IAP (infra/resources/tasks.py): the program declares the
    hosts' names, not their external addresses, which the managed instance group assigns."""
    if s.is_slice and s.access != "iap":
        raise ConfigError(
            stack_key("access"),
            f"{s.access} needs each host's external IP, and a {s.accelerator.name} slice's hosts get theirs from the "
            "managed instance group, which the program cannot name in advance",
            f"pulumi config set tpu-sft:access iap{_OR_ONE_VM}",
        )


# Rules across keys, checked in this order once every key is valid on its own.
CROSS_KEY_RULES = (
    reservation_matches_model,
    direct_access_needs_external_ip,
    flex_start_needs_run_cap,
    flex_start_within_seven_days,
    names_fit,
)
# What a slice cannot take: all of them are checked, and refused in one message, so that a stack switched to a slice
# learns every key to change at once.
SLICE_RULES = (slice_autostop, slice_through_iap)


def fits_a_slice(s: Settings) -> None:
    refused = []
    for rule in SLICE_RULES:
        try:
            rule(s)
        except ConfigError as e:
            refused.append(e)
    if len(refused) == 1:
        raise refused[0]
    if refused:
        raise ConfigError(
            stack_key("acceleratorType"),
            f"{s.accelerator.name} is a slice, which {len(refused)} settings do not fit: "
            + "; ".join(f"{e.key} ({e.problem})" for e in refused),
            "; ".join(e.fix.removesuffix(_OR_ONE_VM) for e in refused) + _OR_ONE_VM,
        )


def single_host_keys_on_a_slice(s: Settings, given: frozenset[str]) -> str | None:
    """The warning for keys that only a single VM uses, set on a stack whose accelerator type is a slice: they are
    ignored, so that switching a VM's stack to a slice is a change of tpu-sft:acceleratorType alone."""
    keys = [stack_key(key) for key in SINGLE_HOST_KEYS if key in given]
    if not s.is_slice or not keys:
        return None
    return (
        f"{', '.join(keys)} ignored: a {s.accelerator.name} slice's hosts cannot share one read-write data disk, so "
        "a slice declares none and keeps its model in the checkpoint bucket"
    )


def untested_trainer(s: Settings) -> str | None:
    """The warning for settings under which the VM would train with another Tunix than the tests ran
    (workload/core/lock.py), and what its checkpoints would then hold."""
    tested = lock.versions()
    if s.pipeline.install_post_train_extras:
        return (
            f"{stack_key('installPostTrainExtras')} true: the post-train extras install Tunix from GitHub over the "
            f"tested google-tunix {tested['google-tunix']}, so the VM trains and checkpoints with code no test ran "
            "(the tested Tunix's checkpoints hold 46.56 GB each for gemma3-4b). SFT needs none of the extras: "
            + set_hint("installPostTrainExtras", "false")
        )
    if s.pipeline.maxtext_version != tested["maxtext"]:
        return (
            f"{stack_key('maxtextVersion')} {s.pipeline.maxtext_version}: the tests ran MaxText {tested['maxtext']} "
            f"with google-tunix {tested['google-tunix']}; this MaxText trains with whatever Tunix it resolves, "
            "and the preflight's compiled step is the tested Tunix's"
        )
    return None


def from_pulumi() -> Settings:
    """The current stack's settings, from the config the engine handed this program.

    Read through `pulumi.runtime.config`, not `pulumi.Config`, on purpose: `pulumi.Config` can neither list the
    keys a stack sets (so a typo such as `tpu-sft:step` would pass silently) nor say synchronously which values
    are stored as secrets (so a token in plain text would pass too); both checks are tested under the mock
    engine (tests/infra/config/test_settings_errors.py). Only this function touches the runtime."""
    import pulumi
    from pulumi.runtime import config as runtime_config

    raw = {**runtime_config.get_config_env(), **runtime_config.CONFIG.get()}
    secret_keys = frozenset(k for k in raw if runtime_config.is_config_secret(k))
    in_tokens, epoch = epochs_as_tokens(raw)  # epochs: the data's kept size, read before anything parses the length
    settings = replace(parse(in_tokens, stack=pulumi.get_stack(), secret_keys=secret_keys), epoch=epoch)
    for warning in settings.warnings:
        pulumi.log.warn(warning)
    is_update = not pulumi.runtime.is_dry_run()
    require_token_for_update(settings, is_update=is_update, environ=os.environ)
    require_private_key(settings.ssh_private_key_path, settings.ssh_public_key, is_update=is_update)
    require_write_token(settings, is_update=is_update, environ=os.environ)
    return settings


def require_token_for_update(settings: Settings, *, is_update: bool, environ: Mapping[str, str]) -> None:
    """Gemma is gated: an update that would train without a token fails here, before anything is created,
    not at conversion time on a VM already billing. A preview needs none (CI previews have no token)."""
    if is_update and settings.pipeline.profile == "full" and not settings.hf_token and not environ.get("HF_TOKEN"):
        raise ConfigError(
            stack_key("hfToken"),
            "is not set and $HF_TOKEN is empty, but the Gemma weights are gated",
            "pulumi config set --secret tpu-sft:hfToken (or export HF_TOKEN before `pulumi up`)",
        )


def require_write_token(settings: Settings, *, is_update: bool, environ: Mapping[str, str]) -> None:
    """Publishing to the Hub needs a write token: an update without one fails before anything is created."""
    hub_repo = settings.publish_hub_repo
    if is_update and hub_repo and not settings.hf_write_token and not environ.get("HF_WRITE_TOKEN"):
        raise ConfigError(
            stack_key("hfWriteToken"),
            f"is not set and $HF_WRITE_TOKEN is empty, but tpu-sft:publishHubRepo is {hub_repo}",
            "pulumi config set --secret tpu-sft:hfWriteToken (a token with write access), or export HF_WRITE_TOKEN",
        )
