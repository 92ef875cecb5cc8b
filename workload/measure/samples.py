"""Before and after: the same prompts to the base model and to the fine-tuned export, greedy, through the export's
tokenizer and chat template, so the only difference is the weights. The prompts are the first user turns of the
held-out split's first rows (the examples the held-out loss is measured on; none when evaluation is off) and the
prompts verify already uses. Writes the answers side by side as Markdown (kept with the model as samples.md) and
their token counts and timings as JSON (verify.json's `samples`). Runs inside the MaxText venv (needs
transformers, torch and datasets):

    python -m workload.measure.samples BASE_MODEL EXPORT_DIR OUT_MD RESULT_JSON
        [--dataset PATH_OR_ID --split S --column C]

BASE_MODEL is a directory or a Hub id, read from the local Hugging Face cache only (bootstrap filled it).
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from workload.measure import logit_parity, verify_hf

HELD_OUT_QUESTIONS = 3
NEW_TOKENS = 48
# verify's chat prompt and logit parity's three short ones (its fourth is a whole transcript).
VERIFY_PROMPTS = (verify_hf.PROMPT[0]["content"], *logit_parity.PROMPTS[:3])


def held_out_questions(
    dataset: str, split: str, column: str, count: int = HELD_OUT_QUESTIONS, data_files: str | None = None
) -> list[str]:
    """The first user turn of each of the split's first `count` rows, in the split's own order. With `data_files`,
    `dataset` is the files' builder (json, parquet), as MaxText reads them."""
    import datasets

    questions = []
    rows = datasets.load_dataset(dataset, data_files=data_files, split=split, streaming=True)
    for index, row in enumerate(rows):
        if index == count:
            break
        turns = row.get(column)
        user = next((t["content"] for t in turns or [] if isinstance(t, dict) and t.get("role") == "user"), None)
        if not isinstance(user, str):
            raise ValueError(f"row {index} of {dataset} {split} has no user turn in column {column!r}")
        questions.append(user)
    return questions


def chat_inputs(tokenizer, prompts: list[str]) -> list:
    """Each prompt as one user turn through the chat template, ready for `generate`: the same for both models."""
    return chat_inputs_of(tokenizer, [[{"role": "user", "content": prompt}] for prompt in prompts])


def chat_inputs_of(tokenizer, conversations: list[list[dict[str, str]]]) -> list:
    """Each conversation through the chat template, with the model's turn begun."""
    return [
        tokenizer.apply_chat_template(turns, add_generation_prompt=True, return_tensors="pt", return_dict=True)
        for turns in conversations
    ]


def load_model(model_path: str):
    """The model as both sides of the comparison load it, and the eval rehearsal's server (eval/chat_server.py):
    bf16, from a directory or the local Hugging Face cache, never the network."""
    import torch
    from transformers import AutoModelForImageTextToText

    return AutoModelForImageTextToText.from_pretrained(model_path, dtype=torch.bfloat16, local_files_only=True)


def answers(model_path: str, inputs: list) -> tuple[list[list[int]], float, float]:
    """Each prompt's greedy continuation (token ids, EOS included when reached), the load's and the generation's
    seconds."""
    import torch

    started = time.monotonic()
    model = load_model(model_path)
    loaded = time.monotonic()
    out = []
    for encoded in inputs:
        with torch.no_grad():
            ids = model.generate(**encoded, max_new_tokens=NEW_TOKENS, do_sample=False)
        out.append(ids[0, encoded["input_ids"].shape[1] :].tolist())
    del model
    return out, round(loaded - started, 2), round(time.monotonic() - loaded, 2)


def _cell(text: str) -> str:
    return text.strip().replace("|", "\\|").replace("\n", "<br>") or "*(nothing)*"


def markdown(prompts: list[str], held_out: int, base: list[str], tuned: list[str], base_name: str) -> str:
    lines = [
        "# Before and after the fine-tune",
        "",
        f"Greedy, at most {NEW_TOKENS} new tokens, the export's chat template for both. Base model: `{base_name}`. "
        f"The first {held_out} prompts are held-out questions (never trained on); the others are verify's.",
        "",
        "| prompt | base model | fine-tuned |",
        "|---|---|---|",
    ]
    lines += [f"| {_cell(p)} | {_cell(b)} | {_cell(t)} |" for p, b, t in zip(prompts, base, tuned, strict=True)]
    return "\n".join(lines) + "\n"


def compare(base_model: str, export_dir: str, questions: list[str]) -> tuple[str, dict]:
    from transformers import AutoTokenizer

    prompts = [*questions, *VERIFY_PROMPTS]
    tokenizer = AutoTokenizer.from_pretrained(export_dir)
    inputs = chat_inputs(tokenizer, prompts)
    base_ids, base_load_s, base_generate_s = answers(base_model, inputs)
    tuned_ids, tuned_load_s, tuned_generate_s = answers(export_dir, inputs)
    generated = sum(map(len, base_ids)) + sum(map(len, tuned_ids))
    result = {
        "prompts": len(prompts),
        "held_out_prompts": len(questions),
        "max_new_tokens": NEW_TOKENS,
        "prompt_tokens": [encoded["input_ids"].shape[1] for encoded in inputs],
        "base_tokens": [len(ids) for ids in base_ids],
        "tuned_tokens": [len(ids) for ids in tuned_ids],
        "base_load_s": base_load_s,
        "tuned_load_s": tuned_load_s,
        "generate_s": round(base_generate_s + tuned_generate_s, 2),
        "tokens_per_s": round(generated / (base_generate_s + tuned_generate_s), 1),
    }
    base, tuned = (
        [tokenizer.decode(ids, skip_special_tokens=True) for ids in answered] for answered in (base_ids, tuned_ids)
    )
    return markdown(prompts, len(questions), base, tuned, base_model), result


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m workload.measure.samples", description=__doc__.split("\n\n")[0])
    parser.add_argument("base_model")
    parser.add_argument("export_dir")
    parser.add_argument("out_md")
    parser.add_argument("result_json")
    parser.add_argument("--dataset", help="where the held-out questions come from (none without it)")
    parser.add_argument("--split", default="test_sft")
    parser.add_argument("--column", default="messages")
    parser.add_argument("--data-files", help="the held-out files, when --dataset is their format (json, parquet)")
    args = parser.parse_args(argv)
    questions = []
    if args.dataset:
        questions = held_out_questions(args.dataset, args.split, args.column, data_files=args.data_files)
    text, result = compare(args.base_model, args.export_dir, questions)
    with open(args.out_md, "w", encoding="utf-8") as f:
        f.write(text)
    with open(args.result_json, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
