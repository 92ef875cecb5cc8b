"""The TPU bench's configurations, and the MaxText arguments each trains with: the pipeline's own train argv
(workload/run/commands.py `train_sft`, as a VM's train step builds it), then what a chip without the model's
weights, the network or a slice needs, then the case's levers.

A case file is JSON, `{"cases": [{"name": …, "batch": 2, …}, …]}`, each key a field of `Case`; bench/tpu/cases/
holds the ones that ran, named for their issue.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from workload.core import lock
from workload.core.config import ConfigError, PipelineConfig
from workload.run import commands
from workload.run.layout import Layout

LOOPS = commands.TRAINER_MODULES  # native: MaxText's own loop; tunix: the seed's, Tunix's PeftTrainer
PLACEMENTS = ("patched", "unpatched")
# Fields an older bench wrote into its results, read again without them: qwix's tile for QLoRA (the pipeline's
# quantisation has none, workload/launch/quantised_base.py).
RETIRED = ("lora_tile_size",)
# Each MaxText release a case can name (`python -m bench.tpu.prepare --maxtext V` unpacks its source), with its loops'
# modules: 0.2.3 renamed train_sft_deprecated. 0.2.3 is also the pinned one: a case that names it runs as one that
# names none, through the VM's launcher (issue 67's cases named it before it was pinned).
RELEASE_LOOPS = {
    "0.2.2": {
        "native": "maxtext.trainers.post_train.sft.train_sft_deprecated",
        "tunix": "maxtext.trainers.post_train.sft.train_sft",
    },
    "0.2.3": {
        "native": "maxtext.trainers.post_train.sft.train_sft_native",
        "tunix": "maxtext.trainers.post_train.sft.train_sft",
    },
}


@dataclass(frozen=True)
class Case:
    name: str
    loop: str = "tunix"
    layers: int = 4  # of gemma3-4b's 34 decoder layers, random weights
    batch: int = 1  # per device
    seq: int = 2048  # max_target_length
    steps: int = 12
    weight_dtype: str = "bfloat16"  # float32 (MaxText's default) does not fit one v5e chip at 4 layers
    remat: str | None = None  # remat_policy; None: MaxText's default
    attention: str | None = None  # None: MaxText's default (autoselected: the TPU's flash kernel)
    vocab_tiling: int | None = None  # num_vocab_tiling
    placement: str = "patched"  # Tunix's optimizer placement: the launcher's (patched) or Tunix's own
    resume: bool = False  # train `steps` with a checkpoint at the end, then 2 × `steps` from it
    maxtext: tuple[str, ...] = ()  # further MaxText key=value options
    xla_flags: tuple[str, ...] = ()  # LIBTPU_INIT_ARGS for the trainer, e.g. tpu-recipes' flags for v6e
    release: str | None = None  # a MaxText release's source by name (RELEASE_LOOPS); None: the pinned one
    lora_rank: int | None = None  # LoRA as the pipeline's `tuning: lora` trains it (workload/core/tuning.py)
    lora_alpha: float | None = None  # None: 2 × the rank
    lora_weight_qtype: str | None = None  # QLoRA: the frozen weights quantised (int8, nf4), as the pipeline's qlora

    def __post_init__(self) -> None:
        if self.loop not in LOOPS:
            raise ConfigError(f"case {self.name}: loop", f"is {self.loop!r}", f"use one of {', '.join(LOOPS)}")
        if self.placement not in PLACEMENTS:
            raise ConfigError(f"case {self.name}: placement", f"is {self.placement!r}", "use patched or unpatched")
        if self.placement == "unpatched" and self.loop != "tunix":
            raise ConfigError(f"case {self.name}: placement", "is Tunix's", "use loop tunix or placement patched")
        if self.release is not None and self.release not in RELEASE_LOOPS:
            raise ConfigError(f"case {self.name}: release", f"is {self.release!r}", f"use {', '.join(RELEASE_LOOPS)}")
        # MaxText applies LoRA in Tunix's loop only, from 0.2.3 on (0.2.2 has no lora keys).
        if (self.lora_rank is not None or self.lora_weight_qtype) and (self.another_release or self.loop != "tunix"):
            needs = "needs Tunix's loop of the pinned MaxText release"
            raise ConfigError(f"case {self.name}: LoRA", needs, "set loop tunix, and no release")
        if self.lora_weight_qtype and self.lora_rank is None:
            raise ConfigError(f"case {self.name}: lora_weight_qtype", "is QLoRA without a rank", "set lora_rank")
        if min(self.layers, self.batch, self.seq, self.steps) < 1:
            raise ConfigError(f"case {self.name}", "needs layers, batch, seq and steps of at least 1", "set them")

    @property
    def another_release(self) -> bool:
        """Whether the case runs another MaxText release than the pinned one."""
        return self.release not in (None, lock.versions()["maxtext"])

    @property
    def module(self) -> str:
        """The trainer module the case runs: its loop's, in its release."""
        return RELEASE_LOOPS[self.release][self.loop] if self.release else LOOPS[self.loop]

    @property
    def launch(self) -> str:
        """How bench/tpu/launcher.py starts its trainer."""
        if self.another_release:
            return "release"
        return "unpatched" if self.placement == "unpatched" else "pinned"

    @property
    def tuning(self) -> str:
        """What the pipeline's `tpu-sft:tuning` would be (workload/core/tuning.py)."""
        if self.lora_rank is None:
            return "full"
        return "qlora" if self.lora_weight_qtype else "lora"

    @classmethod
    def from_mapping(cls, fields: dict[str, Any]) -> Case:
        """A case as a case file, or a results file's record of it, writes it (JSON has lists, not tuples)."""
        lists = {key: tuple(fields.get(key, ())) for key in ("maxtext", "xla_flags")}
        kept = {key: value for key, value in fields.items() if key not in RETIRED}
        return cls(**{**kept, **lists})


def load(path: Path) -> list[Case]:
    try:
        raw = json.loads(path.read_text())["cases"]
        cases = [Case.from_mapping(c) for c in raw]
    except (OSError, ValueError, KeyError, TypeError) as error:
        raise ConfigError(str(path), f"is not a case file ({error})", 'write {"cases": [{"name": …}, …]}') from None
    names = [c.name for c in cases]
    if len(set(names)) != len(names):
        raise ConfigError(str(path), "names a case twice", "give every case its own name")
    return cases


def maxtext_arguments(case: Case, work: str, data_file: str, tokenizer_dir: str, steps: int | None = None) -> list[str]:
    """The trainer's MaxText arguments, after its module: the pipeline's (a LoRA case's adapter as its `tuning` gives
    it, QLoRA's quantisation key among them, which the trainer's launcher takes out: workload/launch/quantised_base.py),
    without the converted checkpoint (random weights) and the profiler, on one process, with the bench's data and
    tokenizer, then the case's levers."""
    config = PipelineConfig(
        dataset=data_file,
        trainer=case.loop,
        tuning=case.tuning,
        lora_rank=case.lora_rank,
        lora_alpha=case.lora_alpha if case.lora_alpha is not None or case.lora_rank is None else 2.0 * case.lora_rank,
        lora_weight_qtype=case.lora_weight_qtype,
        step_count=steps or case.steps,
        per_device_batch_size=case.batch,
        max_target_length=case.seq,
        eval_interval=0,
        checkpoint_period=(steps or case.steps) if case.resume else None,
    )
    layout = Layout(work, work, config.model, case.name)
    argv = list(commands.train_sft(config, layout).argv)
    argv = commands.trainer_arguments(argv)
    argv = [a for a in argv if not a.startswith(("load_parameters_path=", "profiler="))]
    argv += [
        "override_model_config=True",
        f"base_num_decoder_layers={case.layers}",
        f"weight_dtype={case.weight_dtype}",
        "skip_jax_distributed_system=true",  # one process, and a host without sockets
        f"tokenizer_path={tokenizer_dir}",
        f"enable_checkpointing={case.resume}",
    ]
    levers = {"remat_policy": case.remat, "attention": case.attention, "num_vocab_tiling": case.vocab_tiling}
    argv += [f"{key}={value}" for key, value in levers.items() if value is not None]
    return argv + list(case.maxtext)


def run_dir(work: str, case: Case) -> str:
    """Where the case's run writes (MaxText's base_output_directory/run_name)."""
    return Layout(work, work, PipelineConfig.model, case.name).run_dir
