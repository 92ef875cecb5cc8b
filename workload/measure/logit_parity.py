"""Logit parity between the trained MaxText checkpoint and its Hugging Face export, by the method of
MaxText's own `forward_pass_logit_checker` (tests/utils in the MaxText repository; the PyPI wheel does not
ship it): the same prompts through MaxText's model on the checkpoint and through transformers on the
export, a softmax at every position, and KL(P_hf || Q_maxtext) per position, which must stay under a bound.
A wrong activation, a transposed or mis-scaled weight, a missing norm offset all show up here, where
"it loads and generates" does not see them.

Runs inside the MaxText venv; writes the figures as JSON and exits 1 with one line when the bound is
exceeded:

    python -m workload.measure.logit_parity (--max-kl BOUND | --unbounded) [--adapter BASE ADAPTER] \
        EXPORT_DIR RESULT_JSON MAXTEXT_ARGS...

MAXTEXT_ARGS are MaxText config overrides (`key=value`), as for the export: the model, the checkpoint
(`load_parameters_path`), `scan_layers`, the hardware. A LoRA run's (`lora.enable_lora=true`) names the base's
checkpoint there and the adapter's in `lora.lora_restore_path`: MaxText's model is then wrapped as Tunix's loop
trained it (`lora_utils.apply_lora_to_model`) and given the trained adapter (`restore_lora_from_path`). EXPORT_DIR
is then the merged model, and `--adapter` names the exported base and the PEFT adapter, which peft applies to it:
both must match MaxText's logits. `--unbounded` measures the same figures and judges none: a QLoRA run's merged model
against MaxText with its base quantised as in training (started through workload/launch/quantised_base.py), a
distance the quantisation's rounding makes that no bound of an export's faithfulness can hold.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

# The largest KL per position (nats) a faithful export may show. full: MaxText's own bound for gemma3-4b
# (checkpoint_conversion/examples/convert_gemma3_to_hf.sh in the wheel: --max_kl_div=0.015). tiny: chosen
# from measurements on the random tiny model after 30 steps (CPU, float32): a faithful export 4.4e-6, a
# transposed o_proj 3.3e-2, the final norm's scale off by one 1.3e-2. The exact-vs-tanh GELU mix-up
# (maxtext#2867) moves it by 2e-9 there: too small to see on random weights, so verify_hf checks that one.
KL_BOUND = {"full": 0.015, "tiny": 1e-3}

# The checker's own three prompts, plus a conversation longer than the tiny model's sliding window (32),
# so local and global attention layers both see positions the other does not.
PROMPTS = (
    "I love to",
    "Today is a",
    "What is the",
    "<start_of_turn>user\nTell me something about rivers, number 3.<end_of_turn>\n<start_of_turn>model\n"
    "Here is fact 0 about rivers: they are studied by curious people in many places. Here is fact 1 about "
    "rivers: they change course over the years.",
)


def kl_per_position(reference_logits, candidate_logits):
    """KL(P_reference || Q_candidate) at each position, in nats, computed in float64 from logits of shape
    (positions, vocab)."""
    import numpy as np

    p_log = _log_softmax(np.asarray(reference_logits, dtype=np.float64))
    q_log = _log_softmax(np.asarray(candidate_logits, dtype=np.float64))
    return (np.exp(p_log) * (p_log - q_log)).sum(axis=-1)


def _log_softmax(x):
    import numpy as np

    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def maxtext_logits(maxtext_args: list[str], token_ids: list[list[int]]) -> list:
    """MaxText's forward pass on the checkpoint named in `maxtext_args`, one prompt at a time."""
    import jax
    import jax.numpy as jnp
    import numpy as np
    from flax import linen as nn
    from maxtext.common.common_types import DECODING_ACTIVE_SEQUENCE_INDICATOR
    from maxtext.configs import pyconfig
    from maxtext.utils import model_creation_utils

    config = pyconfig.initialize(["logit_parity", *maxtext_args])
    model, mesh = model_creation_utils.from_pretrained(config)
    if config.lora.enable_lora:
        from types import SimpleNamespace

        from maxtext.utils import lora_utils

        model = lora_utils.apply_lora_to_model(model, mesh, config)
        # It restores into `trainer.model`, the only part of a trainer it reads besides `train_steps`.
        lora_utils.restore_lora_from_path(SimpleNamespace(model=model, train_steps=0), config)
    batch = config.global_batch_size_to_train_on  # the model is built for this batch: repeat the prompt
    results = []
    with mesh, nn.logical_axis_rules(config.logical_axis_rules):
        for ids in token_ids:
            tokens = jnp.asarray([ids] * batch, dtype=jnp.int32)
            positions = jnp.broadcast_to(jnp.arange(len(ids), dtype=jnp.int32), tokens.shape)
            segments = jnp.full(tokens.shape, DECODING_ACTIVE_SEQUENCE_INDICATOR, dtype=jnp.int32)
            logits = model(
                decoder_input_tokens=tokens,
                decoder_positions=positions,
                decoder_segment_ids=segments,
                enable_dropout=False,
            )
            results.append(np.asarray(jax.device_get(logits[0]), dtype=np.float32))
    return results


def hf_logits(export_dir: str, token_ids: list[list[int]], adapter_dir: str = "") -> list:
    """The export's logits; with `adapter_dir`, those of the export with peft's LoRA adapter on it."""
    import torch
    from transformers import AutoModelForImageTextToText

    model = AutoModelForImageTextToText.from_pretrained(export_dir, dtype=torch.float32)
    if adapter_dir:
        from peft import PeftModel

        model = PeftModel.from_pretrained(model, adapter_dir)
    model.eval()
    with torch.no_grad():
        return [model(input_ids=torch.tensor([ids])).logits[0].numpy() for ids in token_ids]


def _agreement(
    reference: list, candidate: list, max_kl: float | None, prefix: str, what: str
) -> tuple[dict, list[str]]:
    """The figures of one Hugging Face model against MaxText's logits, keyed `<prefix>logits_…`, and its problem
    (none where there is no bound)."""
    import numpy as np

    kl, top1_same = [], 0
    for hf, mt in zip(reference, candidate, strict=True):
        vocab = min(hf.shape[-1], mt.shape[-1])  # MaxText may pad the vocabulary
        kl.extend(kl_per_position(hf[:, :vocab], mt[:, :vocab]).tolist())
        top1_same += int((hf[:, :vocab].argmax(-1) == mt[:, :vocab].argmax(-1)).sum())
    kl_max = float(max(kl))
    ok = max_kl is None or (bool(np.isfinite(kl_max)) and kl_max <= max_kl)
    problems = (
        []
        if ok
        else [
            f"{what}'s next-token distribution differs from the MaxText checkpoint's: max KL {kl_max:.3g} nats "
            f"per position > bound {max_kl:g} (check the export's config.json and weights)"
        ]
    )
    figures = {
        f"{prefix}logits_kl_max": kl_max,
        f"{prefix}logits_kl_mean": float(np.mean(kl)),
        f"{prefix}logits_top1_agreement": round(top1_same / len(kl), 4),
    }
    return figures, problems


def compare(
    export_dir: str, maxtext_args: list[str], max_kl: float | None, adapter: tuple[str, str] | None = None
) -> dict:
    """`adapter`: the exported base and the PEFT adapter, checked beside EXPORT_DIR (a LoRA run's merged model).
    `max_kl` None: the figures alone."""
    from transformers import AutoTokenizer

    start = time.monotonic()
    tokenizer = AutoTokenizer.from_pretrained(export_dir)
    token_ids = [tokenizer(prompt)["input_ids"] for prompt in PROMPTS]
    reference = hf_logits(export_dir, token_ids)
    with_adapter = hf_logits(adapter[0], token_ids, adapter[1]) if adapter else None
    candidate = maxtext_logits(maxtext_args, token_ids)
    figures, problems = _agreement(reference, candidate, max_kl, "", "the export")
    if with_adapter is not None:
        adapter_figures, adapter_problems = _agreement(with_adapter, candidate, max_kl, "adapter_", "the adapter")
        figures |= adapter_figures
        problems += adapter_problems
    return {
        "ok": not problems,
        "problems": problems,
        **figures,
        "kl_bound": max_kl,
        "logits_positions": sum(len(ids) for ids in token_ids),
        "logits_prompts": len(PROMPTS),
        "logits_seconds": round(time.monotonic() - start, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m workload.measure.logit_parity", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument("export_dir")
    parser.add_argument("result_json")
    bound = parser.add_mutually_exclusive_group(required=True)
    bound.add_argument("--max-kl", type=float, help="largest KL per position, in nats")
    bound.add_argument("--unbounded", action="store_true", help="measure the KL, judge nothing")
    parser.add_argument(
        "--adapter", nargs=2, metavar=("BASE", "ADAPTER"), help="also check this PEFT adapter on this exported base"
    )
    parser.add_argument("maxtext_args", nargs=argparse.REMAINDER, help="MaxText config overrides, key=value")
    args = parser.parse_args(argv)
    result = compare(args.export_dir, args.maxtext_args, args.max_kl, tuple(args.adapter) if args.adapter else None)
    with open(args.result_json, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    print(json.dumps({k: v for k, v in result.items() if k != "problems"}), flush=True)
    if not result["ok"]:
        print("VerificationError: " + "; ".join(result["problems"]), file=sys.stderr, flush=True)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
