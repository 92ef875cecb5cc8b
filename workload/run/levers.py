"""The step's levers (tpu-sft:rematPolicy, attention, flashBlockSize, vocabTiling, weightDtype, xlaFlags) as MaxText's
train step takes them: key=value options after the pipeline's own, and libtpu's flags in its environment. Pure.

A lever left unset adds nothing, so MaxText's own default applies. The preflight compiles the step from the same
argv and environment (workload/preflight/__main__.py), so what it says is what the VM runs. docs/preflight.md ("The
levers") says what each lever trades.
"""

from __future__ import annotations

from workload.core.config import PipelineConfig

# The flash (splash) kernel's block sizes (base.yml): one setting sizes them all, as tpu-recipes' MaxText runs do.
FLASH_BLOCK_KEYS = (
    "sa_block_q",
    "sa_block_kv",
    "sa_block_kv_compute",
    "sa_block_q_dkv",
    "sa_block_kv_dkv",
    "sa_block_kv_dkv_compute",
    "sa_block_q_dq",
    "sa_block_kv_dq",
)
LIBTPU_INIT_ARGS = "LIBTPU_INIT_ARGS"


def maxtext_options(config: PipelineConfig) -> list[str]:
    options = {
        "remat_policy": config.remat_policy,
        "attention": config.attention,
        "num_vocab_tiling": config.vocab_tiling,
        "weight_dtype": config.weight_dtype,
        **dict.fromkeys(FLASH_BLOCK_KEYS, config.flash_block_size),
    }
    return [f"{key}={value}" for key, value in options.items() if value is not None]


def libtpu_env(config: PipelineConfig) -> dict[str, str]:
    """libtpu reads its flags from the environment when it loads; MaxText's loops append their own to it."""
    return {} if config.xla_flags is None else {LIBTPU_INIT_ARGS: config.xla_flags}
