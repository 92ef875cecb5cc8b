"""The rules across keys: what `parse` (infra/config/read_settings.py) checks once every key is valid on its own.

Each rule is a named function of `CROSS_KEY_RULES` or `SLICE_RULES` that refuses a config with a `ConfigError`: one
line naming the key, the problem and the fix. `single_host_keys_on_a_slice` and `untested_trainer` are the warnings a
valid config can still earn, shown by `pulumi preview`/`up`.
"""

from __future__ import annotations

from dataclasses import dataclass

from infra.config.settings import Settings
from workload.core import lock
from workload.core.config import ConfigError, set_hint, stack_key

# Consuming an ordinary (on-demand) specific reservation: STANDARD; RESERVATION_BOUND consumes a calendar-mode
# (future) reservation. Spot and flex-start VMs consume none.
RESERVATION_MODELS = ("RESERVATION_BOUND", "STANDARD")


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


def recovery_needs_autostop(s: Settings) -> None:
    """A group of one recreates the VM that Google deleted at its run cap, as after a preemption: with autostop off
    nothing would ever end it. Autostop resizes the group to 0 once the VM is idle (workload/spend/autostop.py)."""
    if s.recovers and s.autostop == "off":
        raise ConfigError(
            stack_key("autostop"),
            f"is off, but tpu-sft:recovery auto recreates the {s.provisioning_model} VM after its run cap too, so it "
            "would bill until `pulumi destroy`",
            "pulumi config set tpu-sft:autostop delete, or pulumi config set tpu-sft:recovery off",
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
# infra/resources/group.py HOST_NUMBER, not imported (infra/resources is a floor above: tests/test_layers.py);
# tests/infra/config/test_names.py checks they agree
_HOST_NUMBER = "-##"


@dataclass(frozen=True)
class DerivedName:
    """A Compute Engine name the program derives from tpu-sft:instanceName, as Google receives it."""

    what: str
    name: str
    limit: int


def derived_names(s: Settings) -> tuple[DerivedName, ...]:
    """Every Compute Engine name the program derives from tpu-sft:instanceName (infra/resources/machine.py,
    infra/resources/disk.py, infra/resources/network.py, infra/resources/vm.py, infra/resources/vm_group.py,
    infra/resources/slice.py).
    tests/infra/config/test_names.py checks that this is exactly what the program declares, so the rule below and the
    program cannot drift apart."""
    n = s.instance_name

    def auto(what: str, logical_name: str) -> DerivedName:
        return DerivedName(
            f"{what} (auto-named: Pulumi adds '-' and 7 hex digits)", logical_name + AUTO_NAME_SUFFIX, COMPUTE_NAME_MAX
        )

    firewalls = (auto("SSH firewall", f"{n}-ssh"), auto("SSH deny firewall", f"{n}-ssh-deny-other"))
    if s.recovers:  # infra/resources/vm_group.py: the slice's group, of one VM
        return (
            DerivedName("managed instance group", n, COMPUTE_NAME_MAX),
            DerivedName("group's numbered base instance name", n + _HOST_NUMBER, SLICE_NAME_MAX + len(_HOST_NUMBER)),
            auto("instance template", f"{n}-template"),
            auto("data disk", f"{n}-data"),
            *firewalls,
        )
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


def adapter_repo_needs_lora(s: Settings) -> None:
    """Only a LoRA or QLoRA run keeps an adapter (workload/run/kept.py `ADAPTER`) for the publish task to send."""
    tuning = s.pipeline.tuning
    if s.publish_hub_adapter_repo and tuning == "full":
        raise ConfigError(
            stack_key("publishHubAdapterRepo"),
            f"is {s.publish_hub_adapter_repo}, but tpu-sft:tuning is {tuning}, which trains every weight and keeps no "
            "adapter to publish",
            f"pulumi config rm {stack_key('publishHubAdapterRepo')} (tpu-sft:publishHubRepo publishes the model), "
            f"or {set_hint('tuning', 'lora')}",
        )


def eval_gate_has_an_eval(s: Settings) -> None:
    """A blocking gate refuses to publish a model without an eval report (workload/eval/gate.py: a report lost to a
    failure must not pass), so with the eval off (tpu-sft:evalTasks off) a stack that publishes would be refused at
    the end of every run: say so before anything bills, and let the user choose. A stack that publishes nothing, or
    whose gate is warn (it publishes and says there is no report), is left alone."""
    if not s.pipeline.eval_tasks and s.publishes and s.eval_gate == "block":
        raise ConfigError(
            stack_key("evalGate"),
            "is block, but tpu-sft:evalTasks is off, so the publish step would find no eval report and refuse",
            f"{set_hint('evalGate', 'off')} to publish without the quality check, or pulumi config rm "
            f"{stack_key('evalTasks')} to evaluate with the default tasks",
        )


# Rules across keys, checked in this order once every key is valid on its own.
CROSS_KEY_RULES = (
    reservation_matches_model,
    direct_access_needs_external_ip,
    flex_start_needs_run_cap,
    flex_start_within_seven_days,
    recovery_needs_autostop,
    names_fit,
    adapter_repo_needs_lora,
    eval_gate_has_an_eval,
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
