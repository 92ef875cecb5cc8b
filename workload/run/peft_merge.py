"""A LoRA run's merged model: peft's `merge_and_unload` of the exported adapter into the exported base, on the CPU.

MaxText's own merged export (to_huggingface with both `load_parameters_path` and `lora.lora_restore_path`) is not
used: in MaxText 0.2.5 it wrote the base unchanged for a LoRA of Tunix's loop (docs/tuning.md), and peft's merge is
the one a user of the adapter gets. The merge is computed in float32 and saved in the base's own dtype and layout
(its text weights only, as MaxText exported them: the vision tower transformers adds is left out), with its
tokenizer, so the export's readers (verify, keep, publish) take it as they take a full run's export. Runs inside the
MaxText venv (torch, transformers, peft):

    python -m workload.run.peft_merge BASE_DIR ADAPTER_DIR OUT_DIR
"""

from __future__ import annotations

import argparse
import json
import shutil

# What MaxText's text-only export (use_multimodal=False) does not hold, and transformers makes up when it loads one.
NOT_EXPORTED = ("model.vision_tower.", "model.multi_modal_projector.")


def merge(base_dir: str, adapter_dir: str, out_dir: str) -> dict:
    import torch
    from peft import PeftModel
    from transformers import AutoConfig, AutoModelForImageTextToText, AutoTokenizer

    dtype = AutoConfig.from_pretrained(base_dir).dtype  # a torch dtype; the export says bfloat16
    base = AutoModelForImageTextToText.from_pretrained(base_dir, dtype=torch.float32)
    merged = PeftModel.from_pretrained(base, adapter_dir).merge_and_unload().to(dtype)
    text = {k: v for k, v in merged.state_dict().items() if not k.startswith(NOT_EXPORTED)}
    shutil.rmtree(out_dir, ignore_errors=True)
    merged.save_pretrained(out_dir, state_dict=text)
    AutoTokenizer.from_pretrained(base_dir).save_pretrained(out_dir)
    with open(f"{adapter_dir}/adapter_config.json", encoding="utf-8") as f:
        adapter = json.load(f)
    return {"merged_dir": out_dir, "lora_rank": adapter["r"], "lora_alpha": adapter["lora_alpha"]}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m workload.run.peft_merge", description=__doc__.split("\n\n")[0])
    parser.add_argument("base_dir")
    parser.add_argument("adapter_dir")
    parser.add_argument("out_dir")
    args = parser.parse_args(argv)
    print(json.dumps(merge(args.base_dir, args.adapter_dir, args.out_dir)), flush=True)


if __name__ == "__main__":
    main()
