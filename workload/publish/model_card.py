"""The model card (README.md) published with a kept model, written only from what the run recorded: the kept
manifest (the settings that name the run, each step's facts, a file dataset's files) and the kept samples.md. What a
run did not record (an older manifest without settings, a training without held-out passes) is said to be "not
recorded", never guessed.

The YAML front matter is the Hub's model card metadata, built with the pinned huggingface_hub's `ModelCardData` and
rendered by its `ModelCard` (the MaxText venv's, which runs `python -m workload.publish`), not by hand. The Hub
validates it when the card is committed (huggingface_hub's `create_commit` posts README.md to `/api/validate-yaml`
first) and refuses a `datasets:` entry that is not a Hub dataset id (docs/publishing.md cites the rule and where it
was read). So `datasets:` names a Hub dataset only; a dataset of files (`gs://…`, or local files `pulumi up`
copied into the stack's bucket) is described in the card's text by each file's name, row count and sha256, as keep
recorded them (workload/run/data_files.py), and its bucket path is not published: neither in the text nor in the
settings table, which shows a file setting's file name only.

The model is text-only (workload/publish/text_only.py): the card says so, and that it takes no images.

The eval's scores (the kept model's eval/report.json: workload/eval/) go into the metadata as the Hub's `model-index`
evaluation results, so that the Hub's page shows them: one result per task, on the Hub dataset lm-eval's task reads,
with the fine-tuned model's score and the base's beside it, each metric named for its model (the spec: huggingface/
hub-docs `modelcard.md`; ModelCardData parses the plain `model-index` given here into its EvalResults and renders it
back). The text shows the same with the change and its 95 % interval, and what the publish gate found.

Gemma is under the Gemma Terms of Use, which require a model derivative to be distributed with their notice and
its use restrictions passed on (section 3): the card carries the notice and links both, as the model's row of
workload/core/models.py names them.
"""

from __future__ import annotations

import json
import os
import posixpath
from typing import Any

from workload.core.data_source import parse_source
from workload.core.eval_tasks import TASKS
from workload.core.models import GEMMA_TERMS, MODELS, Licence
from workload.core.trainer_loop import TRAINER_LOOPS
from workload.core.tuning import DEFAULT_WEIGHT_QTYPE
from workload.eval import gate
from workload.eval.compare import TaskComparison, points
from workload.publish import layout
from workload.run import kept

SAMPLE_ROWS = 4  # the held-out questions first (samples.py puts them first), then one of verify's prompts
NOT_RECORDED = "not recorded"
FILES_SHOWN = 20  # a dataset of many files (a pattern) lists this many, then their totals
# The Hub dataset each lm-eval task scores (lm-eval 0.4.13's task yamls: dataset_path, dataset_name, the split it
# scores): (dataset id, pretty name, config, split). A task not here (a rehearsal's fixture) is named by itself.
EVAL_DATASETS: dict[str, tuple[str, str, str | None, str]] = {
    "ifeval": ("google/IFEval", "IFEval", None, "train"),
    "gsm8k": ("openai/gsm8k", "GSM8K", "main", "test"),
}
TEXT_ONLY = (
    "It is text-only: the language model of Gemma 3 (`Gemma3ForCausalLM`, model type `gemma3_text`) without Gemma "
    "3's vision tower, so it takes no images."
)


def card(
    manifest: dict[str, Any],
    model_dir: str,
    load_as: str,
    adapter_repo: str | None = None,
    gate_line: str | None = None,
) -> str:
    """The card of the model kept in `model_dir` (its manifest parsed), loaded by `load_as`: a Hub repo id, or the
    gs:// URL it was published to; `adapter_repo`: where a LoRA run's adapter is published alone, if it is;
    `gate_line`: what the publish gate found (workload/eval/gate.py `Verdict.public_line`: no path)."""
    from huggingface_hub import ModelCard, ModelCardData  # the MaxText venv's (pinned): the Hub's own fields

    scores = evaluated(model_dir)
    data = ModelCardData(**metadata(manifest, scores, load_as))
    text = body(manifest, model_dir, load_as, adapter_repo, gate_line)
    return str(ModelCard(f"---\n{data.to_yaml()}\n---\n\n{text}"))


def evaluated(model_dir: str) -> tuple[TaskComparison, ...]:
    """The kept eval report's comparisons; none where there is no readable report (the card then says so)."""
    try:
        report = gate.read_report(os.path.join(model_dir, gate.REPORT))
        return () if report is None or report.get("off") is True else gate.comparisons_of(report)
    except ValueError:
        return ()


def metadata(
    manifest: dict[str, Any], scores: tuple[TaskComparison, ...] = (), name: str | None = None
) -> dict[str, Any]:
    """The Hub's metadata fields of the card, as ModelCardData's arguments (None: left out); with the eval's `scores`,
    their `model-index` for the model `name`."""
    settings = manifest.get("settings") or {}
    base, dataset = _base_and_hub_dataset(settings)
    licence = _licence_of(settings)
    named = name or manifest.get("run_name") or "model"
    fixtures = settings.get("profile") == "tiny"  # the rehearsal scores its fixtures, not the real tasks
    index = {"model-index": model_index(scores, named, base, fixtures)} if scores else {}
    return index | {
        "license": licence.hub_id,
        "license_link": licence.terms,
        "library_name": "transformers",
        "pipeline_tag": "text-generation",
        "base_model": base,
        "base_model_relation": "finetune" if base else None,
        "datasets": [dataset] if dataset else None,  # Hub dataset ids only: the Hub refuses anything else
        "tags": ["tpu-sft", "maxtext", "gemma3", "text-only"],
    }


def model_index(
    scores: tuple[TaskComparison, ...], name: str, base: str | None, fixtures: bool = False
) -> list[dict[str, Any]]:
    """The Hub's `model-index`: one result per task, on the dataset lm-eval's task reads, each metric named for its
    model: this fine-tune's score, then the base's (a tiny run's base is unnamed: "the base model"). A result on part
    of a task (tpu-sft:evalLimit) names how many samples of how many; the rehearsal's `fixtures` are named as such,
    never as the task's Hub dataset, whose scores they are not."""
    base_name = f"base model {base}" if base else "the base model"
    results = []
    for c in scores:
        task = TASKS.get(c.task)
        dataset, pretty, config, split = EVAL_DATASETS.get(c.task, (c.task, c.task, None, None))
        if fixtures:
            dataset, pretty, config, split = (task.fixture if task else c.task), f"{pretty}-format fixture", None, None
        if task and c.n < task.samples and not fixtures:
            pretty = f"{pretty} ({c.n} of {task.samples})"
        where = {"type": dataset, "name": pretty} | ({"config": config} if config else {})
        where |= {"split": split} if split else {}
        metrics = [
            {"type": c.metric, "value": round(c.tuned, 4), "name": f"{c.label}, this fine-tune"},
            {"type": c.metric, "value": round(c.base, 4), "name": f"{c.label}, {base_name}"},
        ]
        results.append({"task": {"type": "text-generation"}, "dataset": where, "metrics": metrics})
    return [{"name": name, "results": results}]


def adapter_card(manifest: dict[str, Any], repo: str, merged_repo: str | None = None) -> str:
    """The card of a LoRA run's adapter, published alone to `repo`: what it is, its base, how to load it, and where its
    merge into the base was published (`merged_repo`), or that it was not."""
    from huggingface_hub import ModelCard, ModelCardData

    settings = manifest.get("settings") or {}
    fields = metadata(manifest) | {"library_name": "peft", "tags": ["tpu-sft", "maxtext", "gemma3", "lora"]}
    base, _ = _base_and_hub_dataset(settings)
    code = f'from peft import AutoPeftModelForCausalLM\n\nmodel = AutoPeftModelForCausalLM.from_pretrained("{repo}")'
    on = f"[{base}](https://huggingface.co/{base})" if base else "the base its adapter_config.json names"
    merged = (
        f"its merge into the base, a model of its own, is [{merged_repo}](https://huggingface.co/{merged_repo}), with "
        "the run's whole card"
        if merged_repo
        else "this repo holds the adapter alone: its merge into the base was not published to the Hub with it"
    )
    text = "\n\n".join(
        [
            f"# {manifest.get('run_name') or NOT_RECORDED}: the LoRA adapter",
            f"This is the LoRA adapter (PEFT), not a whole model, trained by tpu-sft on {on}; {merged}.",
            _licence(_licence_of(settings)),
            f"## How to load\n\n```python\n{code}\n```",
            _training(settings, ((manifest.get("steps") or {}).get("train") or {}).get("facts") or {}),
        ]
    )
    return str(ModelCard(f"---\n{ModelCardData(**fields).to_yaml()}\n---\n\n{text}\n"))


def body(
    manifest: dict[str, Any],
    model_dir: str,
    load_as: str,
    adapter_repo: str | None = None,
    gate_line: str | None = None,
) -> str:
    """The card's Markdown under its metadata."""
    settings = manifest.get("settings") or {}
    steps = manifest.get("steps") or {}
    train = (steps.get("train") or {}).get("facts") or {}
    verify = ((steps.get("verify") or {}).get("facts") or {}).get("verify") or {}
    kept = {entry["path"] for entry in manifest.get("files", [])}
    base, dataset = _base_and_hub_dataset(settings)
    parts = [
        f"# {manifest.get('run_name') or NOT_RECORDED}",
        _summary(settings, base, dataset),
        _licence(_licence_of(settings)),
        _how_to_load(load_as),
        *([_adapter(settings, adapter_repo)] if settings.get("tuning") in ("lora", "qlora") else []),
        _data(settings, dataset, manifest.get("data")),
        _training(settings, train),
        _held_out(train, "loss.png" in kept),
        _benchmarks(evaluated(model_dir), base, gate_line),
        _samples(model_dir if "samples.md" in kept else None),
        _how_made(settings, verify),
    ]
    return "\n\n".join(parts) + "\n"


def _base_and_hub_dataset(settings: dict[str, Any]) -> tuple[str | None, str | None]:
    """The Google base model and the Hub dataset, where the run names them (a tiny-profile run names neither)."""
    if settings.get("profile") == "tiny":
        return None, None
    model = MODELS.get(settings.get("model", ""))
    base = model.hub_id if model else None
    dataset = settings.get("dataset")
    return base, dataset if _is_hub_id(dataset) else None


def _is_hub_id(value: Any) -> bool:
    try:
        return isinstance(value, str) and not parse_source(value).is_file
    except ValueError:
        return False


def _summary(settings: dict[str, Any], base: str | None, dataset: str | None) -> str:
    if settings.get("profile") == "tiny":
        return (
            "A fine-tune by tpu-sft's tiny profile: a randomly initialised 6-layer Gemma 3 trained on generated "
            f"conversations, for tests only. It has learned nothing useful. {TEXT_ONLY}"
        )
    base_text = f"[{base}](https://huggingface.co/{base})" if base else f"a base model {NOT_RECORDED}"
    if dataset:
        data_text = f"[{dataset}](https://huggingface.co/datasets/{dataset})"
        split = settings.get("trainSplit")
        data_text += f" (split `{split}`)" if split else ""
    elif settings.get("dataset"):
        data_text = "its maker's own data (the files under Data below)"
    else:
        data_text = f"a dataset {NOT_RECORDED}"
    return f"A supervised fine-tune of {base_text} on {data_text}. {TEXT_ONLY}"


def _data(settings: dict[str, Any], hub_dataset: str | None, recorded: dict[str, Any] | None) -> str:
    lines = ["## Data", ""]
    if hub_dataset:
        return "\n".join(lines + [f"The Hub dataset [{hub_dataset}](https://huggingface.co/datasets/{hub_dataset})."])
    if not settings.get("dataset"):
        return "\n".join(lines + [f"Data: {NOT_RECORDED}."])
    if not recorded or "files" not in recorded:
        why = f" ({recorded['error']})" if recorded and recorded.get("error") else ""
        return "\n".join(lines + [f"Files, whose names, rows and sha256 were {NOT_RECORDED}{why}."])
    files = recorded["files"]
    lines += ["Files the run trained on (their location is not published):", ""]
    lines += ["| file | rows | sha256 |", "|---|---|---|"]
    lines += [f"| `{f['name']}` | {f['rows']} | `{f['sha256']}` |" for f in files[:FILES_SHOWN]]
    if len(files) > FILES_SHOWN:
        lines += [f"| {len(files) - FILES_SHOWN} more | | |"]
    if len(files) > 1:
        lines += ["", f"{len(files)} files, {sum(f['rows'] for f in files)} rows in all."]
    return "\n".join(lines)


def _licence_of(settings: dict[str, Any]) -> Licence:
    """The licence of the model the run fine-tuned. Every model tpu-sft trains is a Gemma, so a manifest that does not
    record its model (an older one) is a Gemma's too."""
    model = MODELS.get(settings.get("model", ""))
    return model.licence if model else GEMMA_TERMS


def _licence(licence: Licence) -> str:
    # The wording is the Gemma Terms of Use's (a "model derivative", the restrictions of section 3.2): the terms of
    # every row of workload/core/models.py today.
    return "\n".join(
        [
            f"## Licence: the {licence.name}",
            "",
            f"This is a model derivative of Gemma, and under the [{licence.name}]({licence.terms}) it is distributed "
            "with their notice and their use restrictions, which bind whoever uses or redistributes it:",
            "",
            f"> {licence.notice}",
            "",
            f"Its use is subject to the use restrictions of section 3.2 of those terms, the [Gemma Prohibited Use "
            f"Policy]({licence.prohibited_use}). Whoever redistributes it or a model made from it must pass these "
            "terms and restrictions on. The weights were modified by fine-tuning, as this card describes.",
        ]
    )


def _how_to_load(load_as: str) -> str:
    if load_as.startswith("gs://"):
        fetch = f"# first: gcloud storage cp -r {load_as} ./model\n"
        source, note = "./model", ""
    else:
        fetch, source = "", load_as
        note = "\n\nA private repo needs a read token: `hf auth login`, or `HF_TOKEN` in the environment."
    code = (
        f"{fetch}from transformers import AutoModelForCausalLM, AutoTokenizer\n\n"
        f'tokenizer = AutoTokenizer.from_pretrained("{source}")\n'
        f'model = AutoModelForCausalLM.from_pretrained("{source}")'
    )
    return f"## How to load\n\n```python\n{code}\n```{note}"


def _adapter(settings: dict[str, Any], adapter_repo: str | None) -> str:
    """A LoRA run's card says which model is which: the root holds peft's merge, tpu-sft/ the adapter it merged, and
    the adapter's own repo, where it was published to one. A QLoRA run's says too that the base it trained on was
    quantised, and the one it is merged into is not."""
    folder = layout.RUN_DIR + kept.ADAPTER
    frozen = "frozen base weights"
    if settings.get("tuning") == "qlora":
        qtype = settings.get("loraWeightQtype") or DEFAULT_WEIGHT_QTYPE
        frozen = f"frozen base weights quantised to {qtype} while training (QLoRA), merged into the unquantised base"
    own = (
        f"It is also published alone, at the root of [{adapter_repo}](https://huggingface.co/{adapter_repo}), where "
        f'`AutoPeftModelForCausalLM.from_pretrained("{adapter_repo}")` loads it.'
        if adapter_repo
        else "It was not published to a repo of its own."
    )
    return (
        "## The LoRA adapter\n\n"
        f"This run trained a LoRA adapter on {frozen} (`tuning: {settings.get('tuning')}`; its rank, alpha and "
        "modules are in the settings below). The model above is that adapter merged into the base by peft's "
        "`merge_and_unload`: a whole model. The adapter itself, a PEFT repository on the base named in its "
        f"`adapter_config.json`, is in `{folder}`. {own}"
    )


def _training(settings: dict[str, Any], train: dict[str, Any]) -> str:
    lines = ["## Training", ""]
    if settings:
        lines += ["The settings that name the run (`tpu-sft:KEY` in the Pulumi stack):", ""]
        lines += ["| setting | value |", "|---|---|"]
        lines += [f"| `{key}` | `{_shown(key, value)}` |" for key, value in settings.items()]
    else:
        lines += [f"Settings: {NOT_RECORDED}."]
    figures = [
        ("steps trained", train.get("final_step")),
        ("final training loss", None if train.get("final_loss") is None else _loss(train["final_loss"])),
        ("training wall time (s)", train.get("train_wall_s")),
        ("chip-hours", train.get("chip_hours")),
    ]
    recorded = [f"{name}: {value}" for name, value in figures if value is not None]
    lines += ["", ("; ".join(recorded) + ".") if recorded else f"Training figures: {NOT_RECORDED}."]
    return "\n".join(lines)


def _held_out(train: dict[str, Any], curve: bool) -> str:
    lines = ["## Held-out loss", ""]
    if "eval_loss_first_step" not in train:
        return "\n".join(lines + [f"Held-out loss: {NOT_RECORDED} (evaluation was off)."])
    first_step = train["eval_loss_first_step"]
    before = "before (the base model)" if first_step == 0 else "first pass"
    lines += ["| | step | held-out loss |", "|---|---|---|"]
    lines += [f"| {before} | {first_step} | {_loss(train.get('eval_loss_first'))} |"]
    lines += [f"| after | {train.get('eval_loss_final_step')} | {_loss(train.get('eval_loss_final'))} |"]
    change = train.get("eval_loss_change")
    if change is not None:
        lines += ["", f"Change: {change:+.1%}."]
    if curve:
        lines += ["", f"![training and held-out loss]({layout.RUN_DIR}loss.png)"]
    return "\n".join(lines)


def _benchmarks(scores: tuple[TaskComparison, ...], base: str | None, gate_line: str | None) -> str:
    lines = ["## Benchmarks, before and after", ""]
    if not scores:
        return "\n".join(lines + [f"Benchmark scores: {NOT_RECORDED} (the eval was off, or its report is missing)."])
    base_text = f"the base model, {base}" if base else "the base model"
    lines += [
        f"lm-eval's scores of {base_text}, and of this fine-tune, on the same samples with the same generation "
        "settings; the change in points with its 95 % interval (a paired bootstrap over the samples):",
        "",
        "| benchmark | samples | base | fine-tuned | change (points) | 95 % interval |",
        "|---|---|---|---|---|---|",
    ]
    lines += [
        f"| {c.label} | {c.n} | {c.base:.4f} | {c.tuned:.4f} | {points(c.delta):+.1f} | "
        f"{points(c.low):+.1f} to {points(c.high):+.1f} |"
        for c in scores
    ]
    if gate_line:
        lines += ["", f"The publish gate: {gate_line}."]
    return "\n".join(lines)


def _samples(model_dir: str | None) -> str:
    heading = "## Before and after"
    if model_dir is None:
        return f"{heading}\n\nSamples: {NOT_RECORDED}."
    with open(os.path.join(model_dir, "samples.md"), encoding="utf-8") as f:
        text = f.read().splitlines()
    # samples.md (workload/measure/samples.py): a title, one line on how the answers were made, the table.
    intro = [line for line in text if line and not line.startswith(("#", "|"))]
    table = [line for line in text if line.startswith("|")]
    shown = table[: 2 + SAMPLE_ROWS]
    more = f"\n\nAll {len(table) - 2} prompts: [{layout.RUN_DIR}samples.md]({layout.RUN_DIR}samples.md)."
    return "\n\n".join([heading, *intro, "\n".join(shown)]) + more


def _how_made(settings: dict[str, Any], verify: dict[str, Any]) -> str:
    version = settings.get("maxtextVersion") or NOT_RECORDED
    # A run recorded before tpu-sft:trainer existed trained with the seed's loop, Tunix's.
    loop = TRAINER_LOOPS[settings.get("trainer") or "tunix"].module.rsplit(".", 1)[-1]
    accelerator = settings.get("acceleratorType") or NOT_RECORDED
    if "ok" in verify:
        checked = "passed" if verify["ok"] else "failed"
    else:
        checked = NOT_RECORDED
    return "\n".join(
        [
            "## How it was made",
            "",
            f"With tpu-sft on Google Cloud TPUs: MaxText {version} (the pinned release, `tpu-sft:maxtextVersion`) "
            f"fine-tuned it with `{loop}` on {accelerator} and exported it to Hugging Face format with "
            f"`to_huggingface`. Verification (the export loaded with transformers, its logits compared with "
            f"MaxText's): {checked}. The run's own files are in `{layout.RUN_DIR}`: the loss curve, verify.json, "
            f"samples.md, the training metrics and `manifest.json` (every file's size and sha256 as published, with "
            f"what keep recorded of the export's rewritten config and weights; the settings and each step's facts).",
        ]
    )


def _shown(key: str, value: Any) -> str:
    """A setting's value as the card shows it: a file's name, never the bucket or directory it is in."""
    if isinstance(value, str) and (key == "chatTemplate" or (key == "dataset" and not _is_hub_id(value))):
        return posixpath.basename(value)
    return value if isinstance(value, str) else json.dumps(value)


def _loss(value: Any) -> str:
    return f"{value:.4f}" if isinstance(value, int | float) else NOT_RECORDED
