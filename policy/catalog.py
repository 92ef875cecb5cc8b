"""The rules of the pack: names, enforcement levels, configuration, and a way to run them without an engine.

`check_resource` and `check_stack` run every rule over resources given as plain values, e.g. those a test
collected from the Pulumi mock engine. The CrossGuard wiring (`policy.crossguard`) runs the same rules.

Configuration has two sources, as in a real preview:
- policy config (per rule, JSON-schema properties with defaults below), e.g.
  `{"billable-resources-labelled": {"requiredLabels": ["owner"]}}`;
- stack config (`tpu-sft:*` keys, as the engine hands them to the pack): the user's own decisions, here
  `tpu-sft:allowDataDiskReplace` and `tpu-sft:allowBucketReplace`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from policy import bucket, disk, external_ip, firewall, instance, labels
from policy.model import BUCKET, DISK, FIREWALL, HOSTS, INSTANCE_GROUP_MANAGER, Resource, Violation
from policy.replace import Holder

MANDATORY = "mandatory"
ADVISORY = "advisory"

StackConfig = Mapping[str, Any]
RuleConfig = Mapping[str, Any]


@dataclass(frozen=True)
class ResourceRule:
    name: str
    description: str
    level: str
    types: tuple[str, ...]
    check: Callable[[Resource, RuleConfig, StackConfig], list[str]]
    config: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)  # JSON-schema property → schema


@dataclass(frozen=True)
class StackRule:
    name: str
    description: str
    level: str
    check: Callable[[Sequence[Resource], RuleConfig, StackConfig], list[tuple[Resource, str]]]
    config: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)


def stack_flag(stack_config: StackConfig, key: str) -> bool:
    """A boolean `tpu-sft:<key>` as the engine passes it (the text "true"), or as a test passes it (True)."""
    return str(stack_config.get(f"tpu-sft:{key}", "false")).strip().lower() == "true"


def _survives_replace(name: str, description: str, types: tuple[str, ...], holder: Holder) -> ResourceRule:
    """A mandatory rule: a replace of the resource loses what `holder` holds only if the user allowed it."""
    return ResourceRule(
        name=name,
        description=description,
        level=MANDATORY,
        types=types,
        check=lambda r, c, s: holder.lost_to_a_replace(
            r.name,
            r.props,
            protect=r.protect,
            retain_on_delete=r.retain_on_delete,
            replace_allowed=stack_flag(s, holder.allow_key),
        ),
    )


RESOURCE_RULES: tuple[ResourceRule, ...] = (
    ResourceRule(
        name="ssh-not-open-to-internet",
        description="No firewall admits SSH, or every port of a protocol, from 0.0.0.0/0 or ::/0.",
        level=MANDATORY,
        types=(FIREWALL,),
        check=lambda r, c, s: firewall.open_to_internet(r.name, r.props),
    ),
    ResourceRule(
        name="reservation-bound-has-reservation",
        description="A RESERVATION_BOUND instance (or a slice's instance template) names its capacity reservation "
        "(SPECIFIC_RESERVATION).",
        level=MANDATORY,
        types=HOSTS,
        check=lambda r, c, s: instance.reservation_missing(r.name, r.props),
    ),
    ResourceRule(
        name="billable-resources-labelled",
        description="Every billable resource (VM, a slice's instance template, disk) carries the labels the bill is "
        "split by.",
        level=MANDATORY,
        types=(*HOSTS, DISK),
        check=lambda r, c, s: labels.missing(r.name, r.props, c["requiredLabels"]),
        config={
            "requiredLabels": {
                "type": "array",
                "items": {"type": "string"},
                "default": list(labels.DEFAULT_REQUIRED),
                "description": "Label keys every billable resource must carry with a non-empty value.",
            }
        },
    ),
    _survives_replace(
        "data-disk-survives-replace",
        "The data disk is not deleted by a replace unless tpu-sft:allowDataDiskReplace is true.",
        (DISK,),
        disk.DATA_DISK,
    ),
    _survives_replace(
        "checkpoint-bucket-survives-replace",
        "The checkpoint bucket is not emptied by a replace unless tpu-sft:allowBucketReplace is true.",
        (BUCKET,),
        bucket.CHECKPOINT_BUCKET,
    ),
    ResourceRule(
        name="boot-disk-fits-maxtext",
        description="The VM's (or each slice host's) boot disk is at least the size MaxText's install and "
        "checkpoints need.",
        level=MANDATORY,
        types=HOSTS,
        check=lambda r, c, s: instance.boot_disk_too_small(r.name, r.props, c["minimumGb"]),
        config={
            "minimumGb": {
                "type": "integer",
                "minimum": 1,
                "default": instance.MAXTEXT_BOOT_DISK_GB,
                "description": "Smallest boot disk, in GB.",
            }
        },
    ),
    ResourceRule(
        name="run-duration-capped",
        description="A VM (or each slice host) has a run-duration cap, so a forgotten one stops billing by itself; a "
        "reservation-bound one ends with its reservation.",
        level=ADVISORY,
        types=HOSTS,
        check=lambda r, c, s: instance.run_duration_uncapped(r.name, r.props),
    ),
    ResourceRule(
        name="slice-hosts-stay-ended",
        description="A slice's managed instance group does not recreate hosts Google ended (run cap, preemption); "
        "only a group of one VM that keeps its data disk does (tpu-sft:recovery auto).",
        level=MANDATORY,
        types=(INSTANCE_GROUP_MANAGER,),
        check=lambda r, c, s: instance.group_recreates_ended_hosts(r.name, r.props),
    ),
)

STACK_RULES: tuple[StackRule, ...] = (
    StackRule(
        name="no-external-ip-behind-iap",
        description="A VM reached over SSH only through IAP has no external IP.",
        level=ADVISORY,
        check=lambda rs, c, s: external_ip.external_ip_behind_iap(rs),
    ),
)


def rule_config(rule: ResourceRule | StackRule, given: Mapping[str, Any] | None) -> dict[str, Any]:
    """The rule's configuration: each schema default, overridden by what the policy config gives."""
    given = given or {}
    return {key: given.get(key, schema["default"]) for key, schema in rule.config.items()}


def _resource_violations(
    resource: Resource, stack_config: StackConfig, policy_config: Mapping[str, Mapping[str, Any]]
) -> list[Violation]:
    return [
        Violation(rule.name, rule.level, resource.name, message)
        for rule in RESOURCE_RULES
        if resource.type in rule.types
        for message in rule.check(resource, rule_config(rule, policy_config.get(rule.name)), stack_config)
    ]


def check_resource(
    resource_type: str,
    props: Mapping[str, Any],
    options: Mapping[str, Any] | None = None,
    *,
    name: str = "",
    stack_config: StackConfig | None = None,
    policy_config: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Violation]:
    """Every resource rule's violations for one resource.

    `options` takes the resource options that matter here: `protect` and `retain_on_delete` (booleans).
    """
    options = options or {}
    resource = Resource(
        resource_type,
        name or resource_type,
        props,
        protect=bool(options.get("protect", False)),
        retain_on_delete=bool(options.get("retain_on_delete", False)),
    )
    return _resource_violations(resource, stack_config or {}, policy_config or {})


def check_stack(
    resources: Iterable[Resource],
    *,
    stack_config: StackConfig | None = None,
    policy_config: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Violation]:
    """Every rule's violations over a whole stack: resource rules on each resource, then the stack rules."""
    resources = list(resources)
    stack_config = stack_config or {}
    policy_config = policy_config or {}
    found = [v for r in resources for v in _resource_violations(r, stack_config, policy_config)]
    for rule in STACK_RULES:
        config = rule_config(rule, policy_config.get(rule.name))
        found += [
            Violation(rule.name, rule.level, resource.name, message)
            for resource, message in rule.check(resources, config, stack_config)
        ]
    return found
