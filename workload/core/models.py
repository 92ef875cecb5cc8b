"""The models tpu-sft fine-tunes, one row each: every fact of a model the code needs, so that adding a model is adding
a row here (tests/workload/core/test_models.py fails on a row with a field missing).

A row: the model's MaxText name (`tpu-sft:model`, and `model_name=` in MaxText's argv); its Hugging Face repository,
which MaxText's to_maxtext reads the weights from and bootstrap downloads them from before MaxText is installed
(remote/pipeline/bootstrap/seed.py), and whose gated access the data preflight checks (workload/preflight/data.py);
its decoder's shape, which a checkpoint's and the kept model's sizes follow from (infra/pricing/cost.py); and the
licence a fine-tune of it is published under (workload/publish/model_card.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType
from typing import Mapping

# A decoder's shape, by MaxText's names for it (configs/models/<model>.yml).
SHAPE_KEYS = ("num_layers", "emb_dim", "num_query_heads", "num_kv_heads", "head_dim", "mlp_dim", "vocab_size")


@dataclass(frozen=True)
class Licence:
    """The terms a fine-tune is distributed under: what the Hub's model card metadata names and the card quotes."""

    hub_id: str  # the Hub's `license` metadata value
    name: str
    terms: str  # where the terms are published
    prohibited_use: str  # where the use restrictions a derivative passes on are published
    notice: str  # the notice a derivative is distributed with


# Gemma's terms require a model derivative to be distributed with this notice and its use restrictions passed on
# (section 3).
GEMMA_TERMS = Licence(
    hub_id="gemma",
    name="Gemma Terms of Use",
    terms="https://ai.google.dev/gemma/terms",
    prohibited_use="https://ai.google.dev/gemma/prohibited_use_policy",
    notice="Gemma is provided under and subject to the Gemma Terms of Use found at ai.google.dev/gemma/terms",
)


@dataclass(frozen=True)
class Model:
    maxtext_name: str
    hub_id: str  # MaxText's own `HF_IDS` entry for it (maxtext/utils/globals.py)
    shape: Mapping[str, int]  # SHAPE_KEYS → its value
    licence: Licence

    @property
    def parameters(self) -> int:
        return parameter_count(self.shape)


def parameter_count(shape: Mapping[str, int]) -> int:
    """A decoder's parameters (`shape`: SHAPE_KEYS): embedding, per layer attention (q, k, v, o), MLP (gate, up, down)
    and norms (4 of the width, query and key norms), the final norm."""
    emb, heads, kv, hd, mlp = (shape[k] for k in ("emb_dim", "num_query_heads", "num_kv_heads", "head_dim", "mlp_dim"))
    attention = emb * heads * hd + 2 * emb * kv * hd + heads * hd * emb
    per_layer = attention + 3 * emb * mlp + 4 * emb + 2 * hd
    return shape["vocab_size"] * emb + shape["num_layers"] * per_layer + emb


def _shape(*values: int) -> Mapping[str, int]:
    return MappingProxyType(dict(zip(SHAPE_KEYS, values, strict=True)))


# Those MaxText 0.2.2 both converts from Hugging Face (to_maxtext) and fine-tunes with train_sft. The shapes are its
# configs/models/<model>.yml's decoders (the vision tower is not built: use_multimodal=False).
MODELS: dict[str, Model] = {
    model.maxtext_name: model
    for model in (
        Model("gemma3-4b", "google/gemma-3-4b-it", _shape(34, 2560, 8, 4, 256, 10240, 262144), GEMMA_TERMS),
        Model("gemma3-12b", "google/gemma-3-12b-it", _shape(48, 3840, 16, 8, 256, 15360, 262144), GEMMA_TERMS),
        Model("gemma3-27b", "google/gemma-3-27b-it", _shape(62, 5376, 32, 16, 128, 21504, 262144), GEMMA_TERMS),
    )
}
