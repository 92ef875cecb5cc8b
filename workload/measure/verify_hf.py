"""Checks an exported model the way a user will load it: transformers loads it (no text weight missing),
every weight is finite, Gemma 3's activation is the tanh GELU, and it generates a few tokens from a chat
prompt (workload.measure.logit_parity then compares its logits with the checkpoint's). Writes the result as JSON and
exits non-zero when a check fails. Runs inside the MaxText venv (needs transformers and torch):

    python -m workload.measure.verify_hf EXPORT_DIR RESULT_JSON
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from workload.core import export_fix

PROMPT = [{"role": "user", "content": "Write one sentence about the sea."}]
NEW_TOKENS = 8


def verify(export_dir: str) -> dict:
    import torch
    from transformers import AutoModelForImageTextToText, AutoTokenizer

    start = time.monotonic()
    tokenizer = AutoTokenizer.from_pretrained(export_dir)
    # The export holds the text model only (use_multimodal=False); the vision tower is expected to be missing.
    model, info = AutoModelForImageTextToText.from_pretrained(
        export_dir, dtype=torch.bfloat16, output_loading_info=True
    )
    missing_text = sorted(k for k in info["missing_keys"] if "vision" not in k and "multi_modal" not in k)
    nonfinite = sorted(name for name, p in model.named_parameters() if not torch.isfinite(p).all())
    inputs = tokenizer.apply_chat_template(PROMPT, add_generation_prompt=True, return_tensors="pt", return_dict=True)
    with torch.no_grad():
        output = model.generate(**inputs, max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS, do_sample=False)
    new_tokens = output[0, inputs["input_ids"].shape[1] :].tolist()
    problems = [f"text weights missing from the export: {missing_text[:5]}"] if missing_text else []
    problems += [f"non-finite weights: {nonfinite[:5]}"] if nonfinite else []
    problems += [f"generated {len(new_tokens)} tokens, expected {NEW_TOKENS}"] if len(new_tokens) != NEW_TOKENS else []
    activation = model.config.text_config.hidden_activation
    if activation != export_fix.RIGHT:  # too small to see in the logits of a random tiny model
        issue = export_fix.WHY.split(":")[0]
        problems.append(
            f"hidden_activation is {activation!r}, not {export_fix.RIGHT!r} ({issue}); "
            "re-run the export, which corrects it"
        )
    return {
        "ok": not problems,
        "problems": problems,
        "model_class": type(model).__name__,
        "hidden_activation": activation,
        "parameters": sum(p.numel() for p in model.parameters()),
        "prompt": PROMPT[0]["content"],
        "new_token_ids": new_tokens,
        "generated_text": tokenizer.decode(new_tokens),
        "seconds": round(time.monotonic() - start, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workload.measure.verify_hf", description=__doc__.split("\n\n")[0])
    parser.add_argument("export_dir")
    parser.add_argument("result_json")
    args = parser.parse_args(argv)
    result = verify(args.export_dir)
    with open(args.result_json, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    if not result["ok"]:
        print("VerificationError: " + "; ".join(result["problems"]), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
