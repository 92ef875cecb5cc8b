"""Every stack setting, read once and validated before any resource is declared.

`parse` is pure (a mapping of stack keys to raw values in, a frozen `Settings` out) so that any config can be
checked without an engine; `from_pulumi` feeds it the stack's config, and infra/stack.py takes that on to the
settings the program uses (`perDeviceBatchSize auto` and local data resolved). Each `tpu-sft:` key is one row of
`infra/config/setting_table.py` (the pipeline's of `workload/core/config.py`); the rules across keys are the named
functions of `CROSS_KEY_RULES` and `SLICE_RULES` in infra/config/cross_key_rules.py. Errors are `ConfigError`: one
line naming the key, the problem and the fix. How a setting reaches the VM: ARCHITECTURE.md.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace
from typing import Any, Mapping

from infra.config.cross_key_rules import CROSS_KEY_RULES, fits_a_slice, single_host_keys_on_a_slice, untested_trainer
from infra.config.data_size import epochs_as_tokens
from infra.config.setting_table import BY_KEY, PROJECT_ID, RETIRED, SETTINGS, ZONE, Given
from infra.config.settings import Settings
from infra.config.ssh_key_pair import require_private_key
from workload.core.accelerators import ACCELERATORS
from workload.core.config import BY_KEY as PIPELINE_SETTINGS
from workload.core.config import NAMESPACE, ConfigError, PipelineConfig, parse_pattern, stack_key

# A Hugging Face access token, searched for inside every value: never allowed in a plain (non-secret) setting.
_HF_TOKEN = re.compile(r"hf_[A-Za-z0-9]{20,}")
AUTO_BATCH_KEY, AUTO = "perDeviceBatchSize", "auto"  # the largest batch a sweep found (infra/preflight/batch_sweep.py)


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
    parse_pattern("gcp:project", project, PROJECT_ID, "a Google Cloud project id", "my-project-123")
    zone = raw.get("gcp:zone")
    if zone is None:
        raise ConfigError("gcp:zone", "is not set", "pulumi config set gcp:zone us-east5-b")
    parse_pattern("gcp:zone", zone, ZONE, "a zone like us-east5-b", "us-east5-b")

    pipeline_raw = {k: v for k, v in ours.items() if k in PIPELINE_SETTINGS}
    batch_auto = pipeline_raw.get(AUTO_BATCH_KEY) == AUTO
    if batch_auto:
        del pipeline_raw[AUTO_BATCH_KEY]  # the sweep starts at the default batch (the profile's)
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
    named = [
        f"tpu-sft:{key} is {repo}"
        for key, repo in (
            ("publishHubRepo", settings.publish_hub_repo),
            ("publishHubAdapterRepo", settings.publish_hub_adapter_repo),
        )
        if repo
    ]
    if is_update and named and not settings.hf_write_token and not environ.get("HF_WRITE_TOKEN"):
        raise ConfigError(
            stack_key("hfWriteToken"),
            f"is not set and $HF_WRITE_TOKEN is empty, but {' and '.join(named)}",
            "pulumi config set --secret tpu-sft:hfWriteToken (a token with write access), or export HF_WRITE_TOKEN",
        )
