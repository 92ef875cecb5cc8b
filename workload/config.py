"""The pipeline's settings: one frozen, validated object built from stack-config-shaped keys.

The same keys arrive from `pulumi.Config` (infra) and, on the VM, from a JSON file (the CLI), so a value is
validated the same way wherever it comes from. Keys are the stack keys without the `tpu-sft:` prefix;
every error names the full stack key, what is wrong and how to fix it, in one line.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, fields
from typing import Any, Mapping

from workload.accelerators import ACCELERATORS

NAMESPACE = "tpu-sft"

# Models that MaxText 0.2.2 both converts from Hugging Face (to_maxtext) and fine-tunes with train_sft.
SUPPORTED_MODELS = ("gemma3-4b", "gemma3-12b", "gemma3-27b")
PROFILES = ("full", "tiny")  # "tiny": a locally built model and dataset, for tests and the rehearsal only
TORCH_BACKENDS = ("cpu", "auto")

_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.-]*/[A-Za-z0-9][\w.-]*$")
_VERSION = re.compile(r"^\d+\.\d+\.\d+$")
_RUN_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,62}$")
_COLUMN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class ConfigError(ValueError):
    """A setting is wrong. The message is one line: the key, the problem, the fix."""

    def __init__(self, key: str, problem: str, fix: str):
        self.key, self.problem, self.fix = key, problem, fix
        super().__init__(f"{key}: {problem}. Fix: {fix}")


def stack_key(name: str) -> str:
    return name if ":" in name else f"{NAMESPACE}:{name}"


def set_hint(name: str, example: str) -> str:
    """The command that sets `name` to `example`: the fix half of most errors."""
    return f"pulumi config set {stack_key(name)} {example}"


def parse_int(name: str, raw: Any, *, minimum: int, example: str) -> int:
    if isinstance(raw, bool) or not isinstance(raw, (int, str)):
        raise ConfigError(stack_key(name), f"expected a whole number, got {raw!r}", set_hint(name, example))
    try:
        value = int(raw)
    except ValueError:
        raise ConfigError(
            stack_key(name), f"expected a whole number, got {raw!r}", set_hint(name, example)
        ) from None
    if value < minimum:
        raise ConfigError(stack_key(name), f"must be at least {minimum}, got {value}", set_hint(name, example))
    return value


def parse_float(name: str, raw: Any, *, example: str) -> float:
    try:
        value = float(raw) if not isinstance(raw, bool) else float("nan")
    except (TypeError, ValueError):
        value = float("nan")
    if not value > 0 or value == float("inf"):
        raise ConfigError(stack_key(name), f"expected a positive number, got {raw!r}", set_hint(name, example))
    return value


def parse_bool(name: str, raw: Any) -> bool:
    if isinstance(raw, bool):
        return raw
    if isinstance(raw, str) and raw.lower() in ("true", "false"):
        return raw.lower() == "true"
    raise ConfigError(stack_key(name), f"expected true or false, got {raw!r}", set_hint(name, "true"))


def parse_choice(name: str, raw: Any, choices: tuple[str, ...] | list[str]) -> str:
    if raw not in choices:
        raise ConfigError(
            stack_key(name),
            f"{raw!r} is not one of {', '.join(choices)}",
            set_hint(name, choices[0]),
        )
    return raw


def parse_pattern(name: str, raw: Any, pattern: re.Pattern[str], what: str, example: str) -> str:
    if not isinstance(raw, str) or not pattern.match(raw):
        raise ConfigError(stack_key(name), f"{raw!r} is not {what}", set_hint(name, example))
    return raw


def parse_structured(name: str, raw: Any, kind: type, example: str) -> Any:
    """A list or object given natively or as JSON text (how the engine hands structured config to a program)."""
    value = raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw)
        except json.JSONDecodeError:
            value = None
    if not isinstance(value, kind):
        what = "list" if kind is list else "object"
        raise ConfigError(stack_key(name), f"expected a JSON {what}, got {raw!r}", set_hint(name, f"'{example}'"))
    return value


def parse_list(name: str, raw: Any, example: str) -> list[Any]:
    return parse_structured(name, raw, list, example)


@dataclass(frozen=True)
class PipelineConfig:
    """What the VM-side pipeline needs. Defaults reproduce the seed tutorial exactly."""

    model: str = "gemma3-4b"
    steps: int = 1000
    per_device_batch_size: int = 1
    dataset: str = "HuggingFaceH4/ultrachat_200k"
    train_split: str = "train_sft"
    train_data_columns: tuple[str, ...] = ("messages",)
    maxtext_version: str = "0.2.2"
    accelerator_type: str = "v6e-8"
    learning_rate: float | None = None  # None: MaxText's own default (sft.yml)
    max_target_length: int | None = None  # None: MaxText's own default
    checkpoint_period: int | None = None  # None: MaxText's default (10,000: only the final checkpoint, no resume)
    run_name: str | None = None  # None: derived from the training inputs, so a re-run resumes the same run
    install_post_train_extras: bool = True  # seed step 3's install_tpu_post_train_extra_deps (slow; needs GitHub)
    torch_backend: str = "cpu"  # UV_TORCH_BACKEND for the MaxText install
    profile: str = "full"

    # Stack key (without namespace) for each field; the JSON the CLI reads uses the same keys.
    KEYS = {
        "model": "model",
        "steps": "steps",
        "per_device_batch_size": "perDeviceBatchSize",
        "dataset": "dataset",
        "train_split": "trainSplit",
        "train_data_columns": "trainDataColumns",
        "maxtext_version": "maxtextVersion",
        "accelerator_type": "acceleratorType",
        "learning_rate": "learningRate",
        "max_target_length": "maxTargetLength",
        "checkpoint_period": "checkpointPeriod",
        "run_name": "runName",
        "install_post_train_extras": "installPostTrainExtras",
        "torch_backend": "torchBackend",
        "profile": "profile",
    }

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> "PipelineConfig":
        """Validate stack-keyed values (strings or native JSON values); absent or None keys take defaults."""
        unknown = sorted(set(raw) - set(cls.KEYS.values()))
        if unknown:
            raise ConfigError(
                stack_key(unknown[0]),
                "is not a pipeline setting",
                f"remove it or use one of {', '.join(sorted(cls.KEYS.values()))}",
            )
        got = {field: raw[key] for field, key in cls.KEYS.items() if raw.get(key) is not None}
        k = cls.KEYS
        values: dict[str, Any] = {}
        if "model" in got:
            values["model"] = parse_choice(k["model"], got["model"], SUPPORTED_MODELS)
        if "steps" in got:
            values["steps"] = parse_int(k["steps"], got["steps"], minimum=1, example="1000")
        if "per_device_batch_size" in got:
            values["per_device_batch_size"] = parse_int(
                k["per_device_batch_size"], got["per_device_batch_size"], minimum=1, example="1"
            )
        if "dataset" in got:
            values["dataset"] = parse_pattern(
                k["dataset"], got["dataset"], _HUB_ID, "a Hugging Face dataset id (owner/name)",
                "HuggingFaceH4/ultrachat_200k",
            )
        if "train_split" in got:
            values["train_split"] = parse_pattern(
                k["train_split"], got["train_split"], _COLUMN, "a split name", "train_sft"
            )
        if "train_data_columns" in got:
            columns = parse_list(k["train_data_columns"], got["train_data_columns"], '["messages"]')
            if not columns:
                raise ConfigError(
                    stack_key(k["train_data_columns"]), "must name at least one column",
                    set_hint(k["train_data_columns"], "'[\"messages\"]'"),
                )
            for column in columns:
                parse_pattern(k["train_data_columns"], column, _COLUMN, "a column name", "'[\"messages\"]'")
            values["train_data_columns"] = tuple(columns)
        if "maxtext_version" in got:
            values["maxtext_version"] = parse_pattern(
                k["maxtext_version"], got["maxtext_version"], _VERSION, "a release version like 0.2.2", "0.2.2"
            )
        if "accelerator_type" in got:
            values["accelerator_type"] = parse_choice(
                k["accelerator_type"], got["accelerator_type"], tuple(ACCELERATORS)
            )
        if "learning_rate" in got:
            values["learning_rate"] = parse_float(k["learning_rate"], got["learning_rate"], example="2e-5")
        if "max_target_length" in got:
            values["max_target_length"] = parse_int(
                k["max_target_length"], got["max_target_length"], minimum=8, example="2048"
            )
        if "checkpoint_period" in got:
            values["checkpoint_period"] = parse_int(
                k["checkpoint_period"], got["checkpoint_period"], minimum=1, example="100"
            )
        if "run_name" in got:
            values["run_name"] = parse_pattern(
                k["run_name"], got["run_name"], _RUN_NAME,
                "a run name (lower-case letters, digits, '.', '_', '-'; at most 63)", "gemma3-sft",
            )
        if "install_post_train_extras" in got:
            values["install_post_train_extras"] = parse_bool(
                k["install_post_train_extras"], got["install_post_train_extras"]
            )
        if "torch_backend" in got:
            values["torch_backend"] = parse_choice(k["torch_backend"], got["torch_backend"], TORCH_BACKENDS)
        if "profile" in got:
            values["profile"] = parse_choice(k["profile"], got["profile"], PROFILES)
        return cls(**values)

    def to_mapping(self) -> dict[str, Any]:
        """The stack-keyed JSON form; `from_mapping(to_mapping())` gives back an equal object."""
        plain = asdict(self)
        return {
            self.KEYS[f.name]: list(plain[f.name]) if isinstance(plain[f.name], tuple) else plain[f.name]
            for f in fields(self)
        }
