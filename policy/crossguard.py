"""The catalog's rules as CrossGuard policies (pulumi-policy), for `pulumi preview --policy-pack policy`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyConfigSchema,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)

from policy.catalog import RESOURCE_RULES, STACK_RULES, ResourceRule, StackConfig, StackRule, rule_config, stack_flag
from policy.model import DISK, Resource

PACK_NAME = "tpu-sft"


def _resource(
    type_: str, name: str, props: Mapping[str, Any], protect: bool, urn: str, stack_config: StackConfig
) -> Resource:
    # The engine does not pass retainOnDelete to policy packs (its AnalyzerResourceOptions has no such field),
    # so it is read from tpu-sft:keepDataDisk, the one setting the program turns into that option.
    retained = type_ == DISK and stack_flag(stack_config, "keepDataDisk")
    return Resource(type_, name, props, protect=protect, retain_on_delete=retained, urn=urn)


def _metadata(rule: ResourceRule | StackRule) -> dict[str, Any]:
    return {
        "name": rule.name,
        "description": rule.description,
        "enforcement_level": EnforcementLevel(rule.level),
        "config_schema": PolicyConfigSchema(properties={k: dict(v) for k, v in rule.config.items()})
        if rule.config
        else None,
    }


def _resource_policy(rule: ResourceRule, stack_config: StackConfig) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        if args.resource_type not in rule.types:
            return
        resource = _resource(args.resource_type, args.name, args.props, bool(args.opts.protect), args.urn, stack_config)
        for message in rule.check(resource, rule_config(rule, args.get_config()), stack_config):
            report_violation(message, None)

    return ResourceValidationPolicy(validate=validate, **_metadata(rule))


def _stack_policy(rule: StackRule, stack_config: StackConfig) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        resources = [
            _resource(r.resource_type, r.name, r.props, bool(r.opts.protect), r.urn, stack_config)
            for r in args.resources
        ]
        for resource, message in rule.check(resources, rule_config(rule, args.get_config()), stack_config):
            report_violation(message, resource.urn or None)

    return StackValidationPolicy(validate=validate, **_metadata(rule))


def policies(stack_config: StackConfig) -> list[Policy]:
    """Every rule as a CrossGuard policy; `stack_config` is the stack's config as the engine passed it."""
    return [_resource_policy(rule, stack_config) for rule in RESOURCE_RULES] + [
        _stack_policy(rule, stack_config) for rule in STACK_RULES
    ]
