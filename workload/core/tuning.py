"""What `tpu-sft:tuning` trains: every weight (`full`), a LoRA adapter on frozen weights (`lora`), or one on frozen
weights quantised by qwix (`qlora`), and the adapter's shape. Standard library only: the settings
(workload/core/config.py) validate these values, the train and export commands (workload/run/commands.py) give
MaxText `Adapter.maxtext_options`.

MaxText 0.2.3 applies LoRA only in Tunix's loop (`train_sft` calls `lora_utils.apply_lora_to_model`, which wraps the
matched modules with qwix); its own loop (`train_sft_native`) never calls it and would train every weight. qwix walks
the model's NNX modules, which a linen-wrapped decoder does not expose ("Cannot infer collection name from value:
('decoder',)"), so a LoRA run builds the NNX decoder (`pure_nnx_decoder=true`). The checkpoint then holds the
adapter alone, and records neither rank nor alpha: the export is given them again (docs/tuning.md). 0.2.3 has no
key for QLoRA's quantisation: a later release's `lora.lora_weight_qtype` is given in the train's argv, and the
launcher takes it out and hands it to qwix (workload/launch/quantised_base.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Mapping

TUNINGS = ("full", "lora", "qlora")
# qwix's `weight_qtype`s of QLoRA's frozen weights: the 4-bit NormalFloat of the QLoRA paper (Dettmers et al., 2023),
# stored as uint4 with one scale per output channel, or int8. nf4 is the default: it is what QLoRA names, and the
# memory it saves is why one picks QLoRA over LoRA (gemma3-4b's frozen projections in a quarter of bf16's bytes,
# int8's in half); int8 keeps the base nearer the bf16 one it was converted from.
WEIGHT_QTYPES = ("nf4", "int8")
DEFAULT_WEIGHT_QTYPE = "nf4"
QTYPE_KEY = "lora.lora_weight_qtype"  # a later MaxText release's key (its configs/types.py `LoRA`)
# PEFT's names for Gemma 3's projections (what an adapter_config.json's target_modules lists), and MaxText's module
# each is (maxtext/checkpoint_conversion/utils/param_mapping.py: query→q_proj, …, wi_0→gate_proj, wi_1→up_proj).
LORA_MODULES = {
    "q_proj": "self_attention/query",
    "k_proj": "self_attention/key",
    "v_proj": "self_attention/value",
    "o_proj": "self_attention/out",
    "gate_proj": "mlp/wi_0",
    "up_proj": "mlp/wi_1",
    "down_proj": "mlp/wo",
}
# The usual LoRA adapter: every projection, rank 16, alpha twice the rank (MaxText's own defaults, rank 0 and alpha
# 0.0, train nothing).
DEFAULT_RANK = 16
DEFAULT_ALPHA = 32.0
DEFAULT_MODULES = tuple(LORA_MODULES)


@dataclass(frozen=True)
class Adapter:
    rank: int
    alpha: float
    modules: tuple[str, ...]  # keys of LORA_MODULES
    weight_qtype: str | None = None  # QLoRA's: the frozen weights' type in training (WEIGHT_QTYPES); None: LoRA

    @property
    def module_path(self) -> str:
        """qwix's `module_path`, a regular expression over the NNX module paths: `decoder/layers/<block>/…` scanned,
        `decoder/layers/<index>/…` not, and a scanned decoder's last layers that fill no whole block of gemma3's
        six, `decoder/layers_remainder/…` (gemma3-4b's layers 30-33 of 34; MaxText 0.2.3's own default path for
        gemma3, `decoder/layers/(?:[0-9]+/)?.*(…)`, misses them)."""
        return "decoder/(layers|layers_remainder)/.*(" + "|".join(LORA_MODULES[m] for m in self.modules) + ")"

    def parameters(self, shape: Mapping[str, int]) -> int:
        """The adapter's parameters on a decoder of `shape` (workload/core/models.py SHAPE_KEYS): every layer's wrapped
        projection, `inputs` → `outputs` wide, gains A (inputs × rank) and B (rank × outputs)."""
        emb, heads, kv, hd, mlp = (
            shape[k] for k in ("emb_dim", "num_query_heads", "num_kv_heads", "head_dim", "mlp_dim")
        )
        sides = {
            "q_proj": emb + heads * hd,
            "k_proj": emb + kv * hd,
            "v_proj": emb + kv * hd,
            "o_proj": heads * hd + emb,
            "gate_proj": emb + mlp,
            "up_proj": emb + mlp,
            "down_proj": mlp + emb,
        }
        return shape["num_layers"] * self.rank * sum(sides[m] for m in self.modules)

    def maxtext_options(self) -> list[str]:
        """The `lora` block of MaxText's config (configs/types.py `LoRA`), as argv overrides, and the NNX decoder
        that qwix can wrap. QLoRA's quantisation is a later release's key, which only a command started through
        workload/launch/quantised_base.py may be given (0.2.3's pyconfig refuses it): the train's."""
        quantised = [f"{QTYPE_KEY}={self.weight_qtype}"] if self.weight_qtype else []
        return [
            "pure_nnx_decoder=true",
            "lora.enable_lora=true",
            f"lora.lora_rank={self.rank}",
            f"lora.lora_alpha={self.alpha}",
            f"lora.lora_module_path={self.module_path}",
            *quantised,
        ]

    def on_the_unquantised_base(self) -> Adapter:
        """The same adapter on the bf16 base: what the export merges it into, and what the logit check holds it to."""
        return dataclasses.replace(self, weight_qtype=None)


def adapter(
    tuning: str,
    rank: int | None,
    alpha: float | None,
    modules: tuple[str, ...] | None,
    weight_qtype: str | None = None,
) -> Adapter | None:
    """The adapter a run trains, with the defaults for what is unset; None: the run trains every weight."""
    if tuning == "full":
        return None
    qtype = (weight_qtype or DEFAULT_WEIGHT_QTYPE) if tuning == "qlora" else None
    return Adapter(rank or DEFAULT_RANK, DEFAULT_ALPHA if alpha is None else alpha, modules or DEFAULT_MODULES, qtype)
