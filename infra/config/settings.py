"""The stack's settings as the program holds them: one frozen `Settings`, and what it derives from them (a slice or
one VM, the chip-hour price, whether destroy keeps the bucket, where the model is published). `IMAGE`, the boot
image, is the one setting no key sets.

infra/config/read_settings.py reads and checks them from a stack's config; every other module only reads them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from infra.config.data_size import EpochSize
from infra.config.local_data import Upload
from infra.config.setting_table import (
    DEFAULT_INSTANCE_NAME,
    DEFAULT_PROVISIONING_MODEL,
    DEFAULT_PUBLIC_KEY,
    IAP_RANGE,
)
from infra.pricing.cost import STORAGE_USD_PER_GB_MONTH, ChipPrice, chip_price
from workload.core.accelerators import Accelerator
from workload.core.config import PipelineConfig
from workload.eval import gate

IMAGE = "ubuntu-os-accelerator-images/ubuntu-accel-2204-amd64-tpu-v5e-v5p-v6e"


@dataclass(frozen=True)
class Settings:
    project: str
    zone: str
    stack: str
    pipeline: PipelineConfig
    accelerator: Accelerator
    reservation: str | None = None
    provisioning_model: str = DEFAULT_PROVISIONING_MODEL
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
    # None: no cap (tpu-sft:maxRunHours off, or unset with RESERVATION_BOUND); unset otherwise, parse() derives one
    max_run_hours: int | None = None
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
    recovery: str = "auto"  # a VM nothing else brings back is recreated by a group of one (infra/resources/vm_group.py)
    boot_resumes: int = 3  # the run's budget of boot-resumes (workload/run/resume_budget.py)
    publish_gcs_uri: str | None = None  # publishing is opt-in: nothing unless a destination is set
    publish_hub_repo: str | None = None  # the model (a LoRA run's: merged into its base)
    publish_hub_adapter_repo: str | None = None  # a LoRA run's adapter, alone
    publish_hub_public: bool = False
    hf_write_token: str | None = field(default=None, repr=False)  # only ever handed on as a Pulumi secret
    eval_gate: str = (
        gate.DEFAULT_MODE
    )  # what publishing does with a fine-tune worse than its base (workload/eval/gate.py)
    eval_margin: float = gate.DEFAULT_MARGIN_POINTS  # points
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
    def recovers(self) -> bool:
        """Whether the VM is in a managed instance group of one that recreates it (tpu-sft:recovery auto, with SPOT or
        STANDARD: docs/restarts.md)."""
        return self.recovery == "auto" and not self.is_slice and self.provisioning_model in ("SPOT", "STANDARD")

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
        return bool(self.publish_gcs_uri or self.hub_repos)

    @property
    def hub_repos(self) -> tuple[str, ...]:
        """The Hub repos the publish task writes to: the model's and/or the adapter's."""
        return tuple(r for r in (self.publish_hub_repo, self.publish_hub_adapter_repo) if r)

    @property
    def publish_destinations(self) -> dict[str, Any]:
        """Where the publish task sends the model, and the quality gate it passes first: one of its inputs
        (infra/resources/publish.py), and a row of the plan, so a new gate or margin re-runs publishing alone. The
        adapter's repo only where set: a stack that publishes no adapter keeps the inputs it had before the setting
        existed, and its publish task does not re-run for it."""
        where: dict[str, Any] = {"gcs": self.publish_gcs_uri, "hub": self.publish_hub_repo}
        where |= {"public": self.publish_hub_public, "evalGate": self.eval_gate, "evalMargin": self.eval_margin}
        return where | ({"hubAdapter": self.publish_hub_adapter_repo} if self.publish_hub_adapter_repo else {})

    @property
    def ssh_private_key_path(self) -> str:
        return self.ssh_public_key_path.removesuffix(".pub")
