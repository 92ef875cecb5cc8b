"""The pipeline's settings: one frozen, validated object built from stack-config-shaped keys.

The same keys arrive from `pulumi.Config` (infra) and, on the VM, from a JSON file (the CLI), so a value is
validated the same way wherever it comes from. Keys are the stack keys without the `tpu-sft:` prefix;
every error names the full stack key, what is wrong and how to fix it, in one line.
"""

from __future__ import annotations

import dataclasses
import json
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from workload.core.accelerators import ACCELERATORS
from workload.core.contract import PHASES
from workload.core.data_source import BadLocation, parse_share, parse_source, parse_template
from workload.core.eval_tasks import DEFAULT_TASKS, OFF, TASKS
from workload.core.models import MODELS
from workload.core.run_length import default_tokens, sequence_length, steps_for
from workload.core.tuning import LORA_MODULES, TUNINGS, WEIGHT_QTYPES, Adapter, adapter

NAMESPACE = "tpu-sft"

PROFILES = ("full", "tiny")  # "tiny": a locally built model and dataset, for tests and the rehearsal only
# What a profile sets unless the stack does, over PipelineConfig's defaults: the tiny model trains one of its short
# sequences a step, as its CPU and its 48 conversations allow (workload/tiny/assets.py).
PROFILE_DEFAULTS: dict[str, dict[str, Any]] = {"full": {}, "tiny": {"perDeviceBatchSize": 1}}
TORCH_BACKENDS = ("cpu", "auto")
# The SFT loop: MaxText's own (linen `train_step`, its own checkpoints; 1.41x Tunix's tokens/s at the seed's flags
# on a v5e chip, bench/RESULTS.md) or the seed's, Tunix's PeftTrainer (MaxText's `train_sft`).
TRAINERS = ("native", "tunix")
# The step's levers (docs/preflight.md, "The levers"): MaxText's own values for each, as its configs/types.py and
# layers/decoders.py `get_remat_policy` name them. Not "custom", which reads a dozen per-tensor keys of its own.
REMAT_POLICIES = (
    "full",
    "minimal",
    "minimal_with_context",
    "save_dot_with_context_except_mlp",
    "save_dot_except_mlpwi",
    "save_dot_except_mlp",
    "save_qkv_proj",
    "save_out_proj",
    "qkv_proj_offloaded",  # the saved projections go to the host's memory, not the chip's
    "minimal_offloaded",
)
ATTENTION_KERNELS = ("autoselected", "flash", "dot_product")  # a TPU's: autoselected picks flash (splash) there
WEIGHT_DTYPES = ("float32", "bfloat16")
# A flash (splash) block spans whole 128-lane vector registers; MaxText clips a block to the sequence.
_FLASH_BLOCK_UNIT = 128
# base.yml's max_target_length, which a run without tpu-sft:maxTargetLength trains at.
MAXTEXT_MAX_TARGET_LENGTH = 2048

# Full-string patterns (re.fullmatch) of ASCII classes only: these values reach MaxText's argv, a pip
# requirement and shell lines, and `\d`, `\w` and `$` would let other scripts' digits and letters or a trailing
# newline through.
_VERSION = re.compile(r"[0-9]+\.[0-9]+\.[0-9]+")
_RUN_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,62}")
_COLUMN = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_INT = re.compile(r"[+-]?[0-9]+")
_FLOAT = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")
# libtpu's flags as LIBTPU_INIT_ARGS takes them, `--name=value` separated by single spaces: no quote, `$` or `;`,
# since the value reaches a process environment and shell lines.
_XLA_FLAGS = re.compile(r"--[a-z][a-z0-9_]*=[A-Za-z0-9_.,:+-]+( --[a-z][a-z0-9_]*=[A-Za-z0-9_.,:+-]+)*")


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
    if isinstance(raw, bool) or not (isinstance(raw, int) or isinstance(raw, str) and _INT.fullmatch(raw)):
        raise ConfigError(stack_key(name), f"expected a whole number, got {raw!r}", set_hint(name, example))
    value = int(raw)
    if value < minimum:
        raise ConfigError(stack_key(name), f"must be at least {minimum}, got {value}", set_hint(name, example))
    return value


def parse_float(name: str, raw: Any, *, example: str, zero: bool = False) -> float:
    """A finite number above 0 (or at least 0, with `zero`)."""
    native = isinstance(raw, (int, float)) and not isinstance(raw, bool)
    number = native or (isinstance(raw, str) and _FLOAT.fullmatch(raw))
    value = float(raw) if number else float("nan")
    if not (value >= 0 if zero else value > 0) or value == float("inf"):
        what = "a number of at least 0" if zero else "a positive number"
        raise ConfigError(stack_key(name), f"expected {what}, got {raw!r}", set_hint(name, example))
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
    if not isinstance(raw, str) or not pattern.fullmatch(raw):
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
    """What the VM-side pipeline needs; each field is a row of SETTINGS below, which says how it is parsed and which
    phase it feeds. The defaults are the seed tutorial's run (its model, data, MaxText and length in tokens) trained
    as a chip measured it fastest (docs/trainer.md, "The defaults"): MaxText's own loop at batch 4, with a held-out
    loss and checkpoints to resume from, which the seed leaves off. The example stack (Pulumi.dev.yaml) repeats
    them; the seed's loop and batch are `trainer tunix` and `perDeviceBatchSize 1`. The tiny profile keeps its own
    batch (PROFILE_DEFAULTS)."""

    model: str = "gemma3-4b"
    # The run's length (workload/core/run_length.py): at most one of tokens, epochs (which `pulumi up` turns into
    # tokens, infra/config/data_size.py) and a step count; none: the seed's tokens per chip. `steps` is what they come
    # to.
    tokens: int | None = None
    epochs: float | None = None
    step_count: int | None = None
    # 4: the native loop's tokens/s per chip levelled off at batch 3 and 4 on a v5e chip (bench/RESULTS.md, issue 54's
    # sweep), and the preflight fits it on a v6e-8 (docs/trainer.md, "The defaults"); the seed's is 1.
    per_device_batch_size: int = 4
    dataset: str = "HuggingFaceH4/ultrachat_200k"
    train_split: str = "train_sft"
    train_data_columns: tuple[str, ...] = ("messages",)
    maxtext_version: str = "0.2.3"
    accelerator_type: str = "v6e-8"
    learning_rate: float | None = None  # None: MaxText's own default (sft.yml)
    max_target_length: int | None = None  # None: MaxText's own default
    # A checkpoint every 63 steps, so that an interrupted run resumes (the default run's 250 steps: 4 checkpoints, as
    # many as 250 made in the seed's 1,000 steps of batch 1). None: MaxText's default (10,000: only the final one).
    checkpoint_period: int | None = 63
    run_name: str | None = None  # None: derived from the training inputs, so a re-run resumes the same run
    # Held-out loss (docs/learning.md): a pass of eval_steps batches of eval_split before the first update and
    # every eval_interval steps (0: none). Six passes in the default run's 250 steps: ~4 % of its time
    # (docs/learning.md); 3 batches of 4 sequences a chip stand for the 10 of 1 the seed's batch would read.
    eval_interval: int = 50
    eval_steps: int = 3
    eval_split: str = "test_sft"  # UltraChat's held-out split, sft.yml's hf_eval_split
    # A file dataset's held-out examples (a Hub one's are eval_split): files, or a share like "5%" of the training
    # file that `pulumi up` holds out by a fixed seed (workload/core/data_source.py).
    eval_data: str | None = None
    # A chat template of the user's (a .jinja file, local or gs://) instead of the tokenizer's; `pulumi up` copies a
    # local one into the bucket like a local dataset.
    chat_template: str | None = None
    require_learning: bool = False  # fail the run, rather than warn, when the held-out loss did not fall
    # seed step 3's install_tpu_post_train_extra_deps: slow, from GitHub, and its Tunix replaces the tested one;
    # SFT needs none of it
    install_post_train_extras: bool = False
    torch_backend: str = "cpu"  # UV_TORCH_BACKEND for the MaxText install
    profile: str = "full"
    trainer: str = "native"
    # The step's levers (docs/preflight.md, "The levers"); None: MaxText's own default (remat "full", attention
    # "autoselected", no vocabulary tiling, float32 weights, no XLA flags added).
    remat_policy: str | None = None
    attention: str | None = None
    flash_block_size: int | None = None  # every sa_block_* of the flash kernel
    vocab_tiling: int | None = None  # num_vocab_tiling
    # float32 by default: at SFT learning rates (2e-5) a bf16 weight's 8-bit mantissa rounds most updates away.
    weight_dtype: str | None = None
    xla_flags: str | None = None  # LIBTPU_INIT_ARGS of the train step
    # What the run trains (workload/core/tuning.py): every weight, or a LoRA adapter (on quantised weights: qlora);
    # the adapter's shape is unset for `full`, and otherwise its unset parts take tuning.py's defaults (`adapter`).
    tuning: str = "full"
    lora_rank: int | None = None
    lora_alpha: float | None = None
    lora_modules: tuple[str, ...] | None = None
    lora_weight_qtype: str | None = None  # qlora's only
    # The eval phase (workload/eval/, docs/eval.md): the benchmarks run on the base and the fine-tuned model (empty:
    # `off`), and at most this many samples of each (None: all), for a quick run.
    eval_tasks: tuple[str, ...] = DEFAULT_TASKS
    eval_limit: int | None = None

    @classmethod
    def from_mapping(cls, raw: Mapping[str, Any]) -> "PipelineConfig":
        """Validate stack-keyed values (strings or native JSON values); absent or None keys take defaults."""
        if not isinstance(raw, Mapping):
            raise ConfigError(
                f"{NAMESPACE}:*",
                f"the settings must be a JSON object, got {type(raw).__name__}",
                'give an object of stack keys, e.g. {"tokens": 16384000}',
            )
        unknown = sorted(set(raw) - set(BY_KEY))
        if unknown:
            raise ConfigError(
                stack_key(unknown[0]),
                "is not a pipeline setting",
                f"remove it or use one of {', '.join(sorted(BY_KEY))}",
            )
        lengths = [key for key in LENGTH_KEYS if raw.get(key) is not None]
        if len(lengths) > 1:
            raise ConfigError(
                stack_key(lengths[1]),
                f"is set and so is {stack_key(lengths[0])}: one of them gives the run's length",
                f"pulumi config rm {stack_key(lengths[1])}, or pulumi config rm {stack_key(lengths[0])}",
            )
        config = cls(**{s.field: s.parse(s.key, raw[s.key], s.example) for s in SETTINGS if raw.get(s.key) is not None})
        profile = PROFILE_DEFAULTS[config.profile]
        config = dataclasses.replace(config, **{BY_KEY[k].field: v for k, v in profile.items() if raw.get(k) is None})
        held_out_source(config)
        lever_rules(config)
        tuning_rules(config, raw)
        if config.require_learning and not config.eval_interval:
            raise ConfigError(
                stack_key("requireLearning"),
                "needs a held-out loss to judge by, and tpu-sft:evalInterval is 0",
                f"{set_hint('evalInterval', '250')}, or {set_hint('requireLearning', 'false')}",
            )
        return config

    @property
    def adapter(self) -> Adapter | None:
        """The LoRA adapter the run trains, None where it trains every weight."""
        return adapter(self.tuning, self.lora_rank, self.lora_alpha, self.lora_modules, self.lora_weight_qtype)

    @property
    def tokens_per_step(self) -> int:
        """The sequence positions one step trains on, across the accelerator's chips."""
        sequence = sequence_length(self.max_target_length, self.profile)
        return self.per_device_batch_size * sequence * ACCELERATORS[self.accelerator_type].chips

    @property
    def steps(self) -> int:
        """The steps MaxText runs: the step count, or the tokens' whole steps at this batch."""
        if self.step_count is not None:
            return self.step_count
        if self.epochs is not None:
            raise ConfigError(
                stack_key("epochs"),
                "counts passes over the training data, whose size `pulumi up` reads from scripts/preflight --data",
                f"run this through `pulumi up`, or {set_hint('tokens', '16384000')}",
            )
        chips = ACCELERATORS[self.accelerator_type].chips
        return steps_for(self.tokens or default_tokens(chips, self.profile), self.tokens_per_step)

    def to_mapping(self) -> dict[str, Any]:
        """The stack-keyed JSON form; `from_mapping(to_mapping())` gives back an equal object."""
        return {s.key: _plain(getattr(self, s.field)) for s in SETTINGS}

    def phase_settings(self, phase: str) -> dict[str, Any]:
        """The settings `phase` depends on, stack-keyed: its own and every earlier phase's. The one answer to
        "does this change re-run that phase", for the Pulumi program (each phase's inputs), the plan command
        and the VM (job identity and done-markers). A phase task's inputs are exactly this (infra/resources/tasks.py),
        so a change re-runs its phase and the ones after it, never the ones before. Keys sorted: one order wherever
        it is written."""
        depth = PHASES.index(phase)
        return dict(sorted((s.key, _plain(getattr(self, s.field))) for s in SETTINGS if PHASES.index(s.phase) <= depth))

    def weight_inputs(self) -> dict[str, Any]:
        """The settings the trained weights depend on, by field name: what names a run. The length is the steps it
        comes to, however it was given: the same steps at the same batch train the same weights."""
        return {s.field: _plain(getattr(self, s.field)) for s in SETTINGS if s.names_run} | {"steps": self.steps}

    def run_settings(self) -> dict[str, Any]:
        """The same settings stack-keyed, as a user sets them: what a kept model records it was trained with (its
        model card quotes them)."""
        return {s.key: _plain(getattr(self, s.field)) for s in SETTINGS if s.names_run} | {"steps": self.steps}


def held_out_source(config: PipelineConfig) -> None:
    """A file dataset has one split, `train`: its held-out examples are `evalData`, in the dataset's format; a Hub
    dataset's are its `evalSplit`; a share is cut from local files only, where `pulumi up` copies them."""
    dataset = parse_source(config.dataset)
    fix_share = f"{set_hint('evalData', '5%')}, {set_hint('evalData', './held-out.jsonl')}"
    if config.eval_data is None:
        if dataset.is_file and config.eval_interval:
            raise ConfigError(
                stack_key("evalData"),
                f"is not set, and tpu-sft:dataset {config.dataset} is files, which have no held-out split",
                f"{fix_share}, or {set_hint('evalInterval', '0')}",
            )
        return
    if not dataset.is_file:
        raise ConfigError(
            stack_key("evalData"),
            f"is for a file dataset, and tpu-sft:dataset {config.dataset} is a Hub id, which holds out a split",
            f"pulumi config rm {stack_key('evalData')}; {set_hint('evalSplit', 'test')}",
        )
    if parse_share(config.eval_data) is not None:
        if dataset.kind != "local":
            raise ConfigError(
                stack_key("evalData"),
                f"is a share, which only a local tpu-sft:dataset is split into (this is {config.dataset})",
                set_hint("evalData", "gs://BUCKET/held-out.jsonl"),
            )
        return
    held_out = parse_source(config.eval_data)
    if held_out.format != dataset.format:
        raise ConfigError(
            stack_key("evalData"),
            f"is {held_out.format} and tpu-sft:dataset is {dataset.format}: MaxText reads both with one reader",
            f"convert one of them, or {set_hint('evalData', '5%')}",
        )


def lever_rules(config: PipelineConfig) -> None:
    """The levers' rules across keys, as MaxText would refuse them once the VM runs it (configs/types.py)."""
    tiling = config.vocab_tiling or 1
    # MaxText 0.2.2 refused this; 0.2.3 takes it (utils/vocabulary_tiling.py `vocab_tiling_nnx_loss`), untested here.
    if tiling > 1 and config.trainer == "tunix":
        raise ConfigError(
            stack_key("vocabTiling"),
            f"is {tiling}, and vocabulary tiling in Tunix's NNX loop is untested here (tpu-sft:trainer tunix)",
            f"{set_hint('trainer', 'native')}, or {set_hint('vocabTiling', '1')}",
        )
    tokens = config.per_device_batch_size * (config.max_target_length or MAXTEXT_MAX_TARGET_LENGTH)
    if tokens % tiling:
        raise ConfigError(
            stack_key("vocabTiling"),
            f"is {tiling}, which does not divide a chip's {tokens} tokens a step (batch x sequence), as MaxText needs",
            set_hint("vocabTiling", "4"),
        )
    if config.flash_block_size is not None and config.attention == "dot_product":
        raise ConfigError(
            stack_key("flashBlockSize"),
            "sizes the flash kernel's blocks, and tpu-sft:attention is dot_product",
            f"{set_hint('attention', 'flash')}, or pulumi config rm {stack_key('flashBlockSize')}",
        )


_ADAPTER_KEYS = ("loraRank", "loraAlpha", "loraModules", "loraWeightQtype")


def tuning_rules(config: PipelineConfig, raw: Mapping[str, Any]) -> None:
    """LoRA needs the loop that applies it (workload/core/tuning.py says why), an adapter's shape means nothing
    to a run that trains every weight, and the frozen weights' quantisation nothing to one that leaves them as
    they are."""
    if config.tuning == "lora" and raw.get("loraWeightQtype") is not None:
        raise ConfigError(
            stack_key("loraWeightQtype"),
            "quantises the frozen weights of a QLoRA run, and tpu-sft:tuning is lora, which leaves them in bf16",
            f"{set_hint('tuning', 'qlora')}, or pulumi config rm {stack_key('loraWeightQtype')}",
        )
    if config.tuning == "full":
        adapter_keys = [key for key in _ADAPTER_KEYS if raw.get(key) is not None]
        if adapter_keys:
            raise ConfigError(
                stack_key(adapter_keys[0]),
                "shapes a LoRA adapter, and tpu-sft:tuning is full, which trains every weight",
                f"{set_hint('tuning', 'qlora' if adapter_keys[0] == 'loraWeightQtype' else 'lora')}, "
                f"or pulumi config rm {stack_key(adapter_keys[0])}",
            )
        return
    if config.trainer != "tunix":
        raise ConfigError(
            stack_key("tuning"),
            f"{config.tuning} needs Tunix's loop: MaxText's own (tpu-sft:trainer {config.trainer}) does not apply LoRA "
            "in MaxText 0.2.3 and would train every weight",
            f"{set_hint('trainer', 'tunix')}, or {set_hint('tuning', 'full')}",
        )


def _plain(value: Any) -> Any:
    return list(value) if isinstance(value, tuple) else value


@dataclass(frozen=True)
class Setting:
    """One pipeline setting: its stack key (without the namespace) and PipelineConfig field, how a raw value
    is parsed (key, raw, example → value, or ConfigError), an example for the fix in its errors, the first
    phase that reads it (a change re-runs that phase and every later one), and whether the trained weights
    depend on it (then it is part of what names a run)."""

    key: str
    field: str
    parse: Callable[[str, Any, str], Any]
    example: str
    phase: str
    names_run: bool = False


def _int(minimum: int) -> Callable[[str, Any, str], int]:
    return lambda key, raw, example: parse_int(key, raw, minimum=minimum, example=example)


def _pattern(pattern: re.Pattern[str], what: str) -> Callable[[str, Any, str], str]:
    return lambda key, raw, example: parse_pattern(key, raw, pattern, what, example)


def _choice(choices: tuple[str, ...]) -> Callable[[str, Any, str], str]:
    return lambda key, raw, example: parse_choice(key, raw, choices)


def _flash_block(key: str, raw: Any, example: str) -> int:
    size = parse_int(key, raw, minimum=_FLASH_BLOCK_UNIT, example=example)
    if size % _FLASH_BLOCK_UNIT:
        problem = f"must be a multiple of {_FLASH_BLOCK_UNIT}, got {size}"
        raise ConfigError(stack_key(key), problem, set_hint(key, example))
    return size


def _positive_float(key: str, raw: Any, example: str) -> float:
    return parse_float(key, raw, example=example)


def _float_or_zero(key: str, raw: Any, example: str) -> float:
    return parse_float(key, raw, example=example, zero=True)


def _bool(key: str, raw: Any, example: str) -> bool:
    return parse_bool(key, raw)


def _dataset(key: str, raw: Any, example: str) -> str:
    try:
        return parse_source(raw).location
    except BadLocation as error:
        forms = f"{set_hint(key, example)}, or gs://BUCKET/PATH/*.jsonl, or ./chats.jsonl (docs/data.md)"
        raise ConfigError(stack_key(key), str(error), forms) from None


def _held_out(key: str, raw: Any, example: str) -> str:
    """A share (`5%`, at most 50%) or a file location in a dataset's forms."""
    if isinstance(raw, str) and raw.endswith("%"):
        if parse_share(raw) is None:
            raise ConfigError(stack_key(key), f"{raw!r} is not a share above 0% and at most 50%", set_hint(key, "5%"))
        return raw
    try:
        held_out = parse_source(raw)
    except BadLocation as error:
        raise ConfigError(stack_key(key), str(error), set_hint(key, example)) from None
    if not held_out.is_file:
        raise ConfigError(stack_key(key), f"{raw!r} is a Hub id, not files", set_hint(key, example))
    return held_out.location


def _template(key: str, raw: Any, example: str) -> str:
    try:
        return parse_template(raw).location
    except BadLocation as error:
        raise ConfigError(stack_key(key), str(error), set_hint(key, example)) from None


def _lora_modules(key: str, raw: Any, example: str) -> tuple[str, ...]:
    modules = parse_list(key, raw, example)
    unknown = [m for m in modules if m not in LORA_MODULES]
    if not modules or unknown or len(set(modules)) != len(modules):
        problem = f"{unknown[0]!r} is not a projection" if unknown else "must name each projection once"
        raise ConfigError(
            stack_key(key), f"{problem}; one or more of {', '.join(LORA_MODULES)}", set_hint(key, f"'{example}'")
        )
    return tuple(modules)


def _columns(key: str, raw: Any, example: str) -> tuple[str, ...]:
    columns = parse_list(key, raw, example)
    if not columns:
        raise ConfigError(stack_key(key), "must name at least one column", set_hint(key, f"'{example}'"))
    for column in columns:
        parse_pattern(key, column, _COLUMN, "a column name", f"'{example}'")
    return tuple(columns)


def _eval_tasks(key: str, raw: Any, example: str) -> tuple[str, ...]:
    """A JSON list of task names, or `off` (the same as an empty list, which is how `to_mapping` writes it): no eval."""
    if raw == OFF:
        return ()
    known = f"one or more of {', '.join(TASKS)}, or {OFF}"
    names = parse_list(key, raw, example)
    unknown = [n for n in names if n not in TASKS]
    if unknown or len(set(names)) != len(names):
        problem = f"{unknown[0]!r} is not a task" if unknown else "must name each task once"
        raise ConfigError(stack_key(key), f"{problem}; {known}", set_hint(key, f"'{example}'"))
    return tuple(names)


def _eval_limit(key: str, raw: Any, example: str) -> int | None:
    """`all`, or the samples of each task a quick run scores."""
    return None if raw == "all" else parse_int(key, raw, minimum=1, example=example)


# In the order of the phases they feed (workload/core/contract.py PHASES).
SETTINGS: tuple[Setting, ...] = (
    Setting(
        "maxtextVersion",
        "maxtext_version",
        _pattern(_VERSION, "a release version like 0.2.3"),
        "0.2.3",
        "bootstrap",
        names_run=True,
    ),
    Setting("installPostTrainExtras", "install_post_train_extras", _bool, "false", "bootstrap"),
    Setting("torchBackend", "torch_backend", _choice(TORCH_BACKENDS), "cpu", "bootstrap"),
    # Bootstrap downloads the model's weights beside the install (the full profile only).
    Setting("model", "model", _choice(tuple(MODELS)), "gemma3-4b", "bootstrap", names_run=True),
    Setting("profile", "profile", _choice(PROFILES), "full", "bootstrap", names_run=True),
    # The run's length: at most one of these three (LENGTH_KEYS). None names the run: the steps they come to do
    # (weight_inputs). `steps` is for the tiny profile and tests, whose CPU is one device whatever the accelerator.
    Setting("tokens", "tokens", _int(1), "16384000", "train"),
    Setting("epochs", "epochs", _positive_float, "1", "train"),
    Setting("steps", "step_count", _int(1), "1000", "train"),
    Setting("trainer", "trainer", _choice(TRAINERS), "tunix", "train", names_run=True),
    Setting("perDeviceBatchSize", "per_device_batch_size", _int(1), "1", "train", names_run=True),
    Setting("tuning", "tuning", _choice(TUNINGS), "lora", "train", names_run=True),
    Setting("loraRank", "lora_rank", _int(1), "16", "train", names_run=True),
    Setting("loraAlpha", "lora_alpha", _positive_float, "32", "train", names_run=True),
    Setting("loraModules", "lora_modules", _lora_modules, '["q_proj", "v_proj"]', "train", names_run=True),
    Setting("loraWeightQtype", "lora_weight_qtype", _choice(WEIGHT_QTYPES), "nf4", "train", names_run=True),
    # The step's levers: how it computes, not what, so they name no run (a change resumes the same run), except the
    # weights' dtype, which the trained weights are kept in.
    Setting("rematPolicy", "remat_policy", _choice(REMAT_POLICIES), "minimal", "train"),
    Setting("attention", "attention", _choice(ATTENTION_KERNELS), "flash", "train"),
    Setting("flashBlockSize", "flash_block_size", _flash_block, "1024", "train"),
    Setting("vocabTiling", "vocab_tiling", _int(1), "4", "train"),
    Setting("weightDtype", "weight_dtype", _choice(WEIGHT_DTYPES), "float32", "train", names_run=True),
    Setting(
        "xlaFlags",
        "xla_flags",
        _pattern(_XLA_FLAGS, "XLA flags (--name=value, one space between)"),
        "--xla_tpu_enable_async_collective_fusion=true",
        "train",
    ),
    # A Hub id, gs:// files or local files (workload/core/data_source.py); `pulumi up` puts a local one's
    # content-hashed copy here (infra/config/local_data.py), so a changed file is a changed value.
    Setting("dataset", "dataset", _dataset, "HuggingFaceH4/ultrachat_200k", "train", names_run=True),
    Setting("trainSplit", "train_split", _pattern(_COLUMN, "a split name"), "train_sft", "train", names_run=True),
    Setting("trainDataColumns", "train_data_columns", _columns, '["messages"]', "train", names_run=True),
    # The template decides which tokens a conversation becomes, so it names the run.
    Setting("chatTemplate", "chat_template", _template, "./chat-template.jinja", "train", names_run=True),
    # 0 trains nothing: a run that only measures the base model (its held-out loss then cannot fall).
    Setting("learningRate", "learning_rate", _float_or_zero, "2e-5", "train", names_run=True),
    Setting("maxTargetLength", "max_target_length", _int(8), "2048", "train", names_run=True),
    Setting("acceleratorType", "accelerator_type", _choice(tuple(ACCELERATORS)), "v6e-8", "train", names_run=True),
    # How often a checkpoint is written changes no weight, so it names no run; but the train job must see a new
    # value (a resumed attempt uses it), so like every row it re-runs its phase (a finished training is then a
    # no-op that re-checks its checkpoint) on both sides.
    Setting("checkpointPeriod", "checkpoint_period", _int(1), "100", "train"),
    # The held-out loss changes no weight, so these name no run; a change applies from the next training attempt.
    Setting("evalInterval", "eval_interval", _int(0), "250", "train"),
    Setting("evalSteps", "eval_steps", _int(1), "10", "train"),
    Setting("evalSplit", "eval_split", _pattern(_COLUMN, "a split name"), "test_sft", "train"),
    Setting("evalData", "eval_data", _held_out, "gs://my-bucket/held-out.jsonl", "train"),
    Setting("requireLearning", "require_learning", _bool, "false", "train"),
    Setting(
        "runName",
        "run_name",
        _pattern(_RUN_NAME, "a run name (lower-case letters, digits, '.', '_', '-'; at most 63)"),
        "gemma3-sft",
        "train",
    ),
    Setting("evalTasks", "eval_tasks", _eval_tasks, '["ifeval", "gsm8k"]', "eval"),
    Setting("evalLimit", "eval_limit", _eval_limit, "100", "eval"),
)
BY_KEY = {s.key: s for s in SETTINGS}
LENGTH_KEYS = ("tokens", "epochs", "steps")
