"""The pipeline's steps. Each runs its MaxText (or helper) subprocess through the context, checks what it
produced, and returns the directory or file it produced plus the facts worth recording. A step raises
`StepFailed` with a one-line cause; it never touches an earlier step's outputs.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from workload.core import export_fix
from workload.core.accelerators import ACCELERATORS
from workload.core.config import PipelineConfig
from workload.core.trainer_loop import TRAINER_LOOPS, TrainerLoop
from workload.launch.jax_process import ONE_HOST, JaxProcess
from workload.launch.proc import StepFailed, run_logged
from workload.measure import hbm_peak, learning, throughput
from workload.run import commands, data_files, kept, markers, storage, train_metrics
from workload.run.events import Events, StepProgress, parse_eval, parse_step
from workload.run.fingerprint import manifest
from workload.run.layout import Layout
from workload.run.tensorboard_redact import redact_event_files
from workload.spend.bill import Meter

ORBAX_COMMIT_FILE = "commit_success.txt"  # orbax's atomicity_types.COMMIT_SUCCESS_FILE


@dataclass
class Context:
    config: PipelineConfig
    layout: Layout
    events: Events
    python: str  # the MaxText venv's interpreter
    hostname: str
    base_env: dict[str, str]  # the environment children start from: the token as HF_TOKEN_PATH, never HF_TOKEN
    scrub: Callable[[str], str]
    package_root: str  # where `workload` is importable from (the tiny launcher and helpers need it)
    step_fingerprints: dict[str, str] = field(default_factory=dict)  # each step's inputs (workload/run/pipeline.py),
    # recorded with what is kept
    log_paths: list[str] = field(default_factory=list)
    meter: Meter | None = None  # the VM's bill so far (workload/spend/bill.py); None: not measured
    token: str | None = None  # masked out of MaxText's TensorBoard files, should a copy ever get there
    worker: JaxProcess = ONE_HOST  # this host's place in a slice (workload/launch/jax_process.py)
    # A shell script of the install steps convert ran beside, which the steps after it need: run once, before the
    # first of them that runs (remote/pipeline/claim.py writes it); None when the install is whole.
    finish_install: str | None = None
    required_mount: str | None = None  # where the kept dir's disk must be mounted before keep (the VM's data disk)
    eval_python: str | None = None  # the eval venv's interpreter (workload/run/eval_step.py); None: not installed

    def run(
        self,
        name: str,
        argv: tuple[str, ...] | list[str],
        env: dict[str, str] | None = None,
        on_line: Callable[[str], None] = lambda line: None,
    ) -> None:
        path = os.path.join(self.layout.logs_dir, f"{name}-{time.strftime('%Y%m%d-%H%M%S')}.log")
        self.log_paths.append(path)
        child_env = {**self.base_env, **(env or {})}
        child_env["PYTHONPATH"] = os.pathsep.join(filter(None, [self.package_root, child_env.get("PYTHONPATH")]))
        os.makedirs(self.layout.work_dir, exist_ok=True)
        # cwd: MaxText drops stray files (maxtext_output/, metrics txt) into its working directory.
        run_logged(argv, env=child_env, log_path=path, cwd=self.layout.work_dir, on_line=on_line, scrub=self.scrub)

    def command(self, builder) -> commands.Command:
        return builder(self.config, self.layout, commands.OnHost(self.python, self.hostname, self.worker))


@dataclass
class Outcome:
    outputs: str  # a directory or file; its manifest goes into the done-marker
    facts: dict[str, Any]
    hashes: bool = False  # sha256 in the marker's manifest (small outputs); sizes only for checkpoints


def _fresh(path: str) -> None:
    """A step's own output from an earlier failed attempt would make MaxText refuse or mix results."""
    shutil.rmtree(path, ignore_errors=True)


def assets(ctx: Context) -> Outcome:
    _fresh(ctx.layout.tiny_dir)
    ctx.run("assets", [ctx.python, "-m", "workload.tiny.assets", ctx.layout.tiny_dir])
    return Outcome(ctx.layout.tiny_dir, {"tiny_dir": ctx.layout.tiny_dir})


def convert(ctx: Context) -> Outcome:
    _fresh(ctx.layout.converted_base)
    command = ctx.command(commands.to_maxtext)
    ctx.run("convert", command.argv, command.env)
    if not os.path.isdir(ctx.layout.converted_checkpoint):
        raise StepFailed(f"to_maxtext exited 0 but wrote no checkpoint at {ctx.layout.converted_checkpoint}")
    return Outcome(ctx.layout.converted_base, {"checkpoint": ctx.layout.converted_checkpoint})


def latest_checkpoint(layout: Layout, loop: TrainerLoop) -> int | None:
    """The updates done by the highest finished checkpoint `loop` wrote, locally or in a bucket. orbax marks a
    finished step the way its atomicity_defaults choose by path: locally it writes `<step>.orbax-checkpoint-tmp-*`
    and renames it; on Cloud Storage, which cannot rename, it writes `<step>/` in place and adds
    `commit_success.txt` last."""

    def finished(step: int) -> bool:
        if storage.is_remote(layout.checkpoints_dir):
            return storage.read_text(storage.join(layout.checkpoint(step), ORBAX_COMMIT_FILE)) is not None
        return storage.is_dir(storage.join(layout.checkpoint(step), loop.weights_item))

    steps = [int(n) for n in storage.list_dirs(layout.checkpoints_dir) if n.isdigit() and finished(int(n))]
    return loop.updates(max(steps)) if steps else None


def _read_jsonl(path: str) -> list[dict]:
    try:
        with open(path, encoding="utf-8") as f:
            return [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        return []


def _append_jsonl(path: str, record: dict) -> None:
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")


def train(ctx: Context) -> Outcome:
    layout, steps, loop = ctx.layout, ctx.config.steps, TRAINER_LOOPS[ctx.config.trainer]
    start_step = latest_checkpoint(layout, loop)
    if start_step is not None and start_step > steps:
        raise StepFailed(
            f"run {layout.run_name} already has checkpoint {start_step}, beyond steps={steps}; set another runName"
        )
    # The runner's records beside the checkpoints are worker 0's: every worker logs the same steps.
    leader = ctx.worker.leader
    if leader:
        train_metrics.restore(layout)
    if start_step != steps:
        if start_step is not None:
            # Either loop restores the weights, the optimizer state and so the learning rate's schedule (MaxText's
            # own loop its whole TrainState, step included); with Hugging Face data neither restores the data
            # iterator (MaxText checkpoints it for grain data only), so it starts afresh.
            ctx.events.emit(
                "resume",
                phase="train",
                from_step=start_step,
                checkpoint=loop.checkpoint_step(start_step),
                checkpoints=layout.checkpoints_dir,
                data="restarts from the first example (MaxText does not checkpoint the data iterator)",
            )
        try:
            _train_attempt(ctx)
        finally:  # a failed or killed attempt's event files too: the next step keeps them
            if leader:  # JAX process 0 writes MaxText's TensorBoard files
                redact_event_files(layout.tensorboard_dir, ctx.token)
                train_metrics.persist(layout)
    final = latest_checkpoint(layout, loop)
    if final != steps:
        raise StepFailed(
            f"training ended at checkpoint {final} of {steps} steps (the trainer stops silently when the "
            "data runs out; the data iterator restarts from the beginning on resume)"
        )
    attempts, metrics = _read_jsonl(layout.attempts_file), _read_jsonl(layout.metrics_file)
    by_step = {r["step"]: r for r in metrics if "loss" in r}
    final_loss = by_step.get(steps, {}).get("loss")
    if final_loss is None or not math.isfinite(final_loss):
        raise StepFailed(f"final training loss is {final_loss}, not a finite number")
    held_out = learning.judge(learning.curve(metrics))
    if ctx.config.require_learning and not held_out.get("learned"):
        raise StepFailed(learning.refusal(held_out))
    wall = training_wall_seconds(attempts, metrics)
    chips = 0 if ctx.config.profile == "tiny" else ACCELERATORS[ctx.config.accelerator_type].chips
    receipt = layout.result("trained-checkpoint.json")
    with open(receipt, "w", encoding="utf-8") as f:  # what the done-marker checks: the checkpoint may be remote
        final_checkpoint = layout.checkpoint(loop.checkpoint_step(steps))
        json.dump({"checkpoint": final_checkpoint, "files": storage.files(final_checkpoint)}, f)
    return Outcome(
        receipt,
        {
            "trained_checkpoint": layout.trained_params(loop, steps),
            "run_name": layout.run_name,
            "final_step": final,
            "final_loss": final_loss,
            "train_wall_s": round(wall, 1),
            "chips": chips,
            "chip_hours": round(wall * chips / 3600, 3),
            **throughput.train_figures(attempts, metrics, wall),
            **hbm_peak.summary(attempts),
            **held_out,
        },
    )


def training_wall_seconds(attempts: list[dict], metrics: list[dict]) -> float:
    """Wall seconds of every training attempt: start to end, or, for an attempt killed with the runner
    (no end record), start to its last logged step — a lower bound, but the chips were busy for it."""
    ended = {a["attempt"]: a["seconds"] for a in attempts if "seconds" in a}
    last_seen: dict[float, float] = {}
    for record in metrics:
        if "attempt" in record:
            last_seen[record["attempt"]] = max(last_seen.get(record["attempt"], 0.0), record["t"])
    starts = {a["attempt"] for a in attempts}
    return sum(ended[s] if s in ended else max(last_seen.get(s, s) - s, 0.0) for s in starts)


def _place_chat_template(ctx: Context) -> None:
    """The user's chat template, from the bucket (or the host's path) to the file train_sft's argv names."""
    text = storage.read_text(ctx.config.chat_template) if ctx.config.chat_template else None
    if ctx.config.chat_template and text is None:
        raise StepFailed(f"tpu-sft:chatTemplate {ctx.config.chat_template} cannot be read from this host")
    if text is not None:
        with open(commands.chat_template_file(ctx.layout), "w", encoding="utf-8") as f:
            f.write(text)


def _train_attempt(ctx: Context) -> None:
    _place_chat_template(ctx)
    loop = TRAINER_LOOPS[ctx.config.trainer]
    progress = StepProgress(ctx.config.steps)
    attempt = time.time()
    timeline = throughput.AttemptTimeline(attempt)
    _append_jsonl(ctx.layout.attempts_file, {"attempt": attempt})
    persisting = train_metrics.Cadence(ctx.config.checkpoint_period)

    def on_line(line: str) -> None:
        timeline.observe(line, time.time())
        if progress.peak_tflops_per_device is None and timeline.device_kind:
            progress.peak_tflops_per_device = throughput.peak_tflops_per_device(timeline.device_kind)[0]
        held_out = parse_eval(line)
        if held_out is not None:
            held_out["step"] = loop.updates(held_out["step"])
            _append_jsonl(ctx.layout.metrics_file, {**held_out, "attempt": attempt, "t": round(time.time(), 3)})
            ctx.events.emit("eval", phase="train", **progress.held_out(held_out))
            return
        record = parse_step(line)
        if record is not None:
            record["step"] = loop.updates(record["step"])  # counted in updates done, whichever loop logged it
            _append_jsonl(ctx.layout.metrics_file, {**record, "attempt": attempt, "t": round(time.time(), 3)})
            fields = progress.fields(record)
            cost = ctx.meter.cost_so_far() if ctx.meter else None
            ctx.events.step("train", fields if cost is None else {**fields, "cost_usd": cost})
            if ctx.worker.leader and persisting.due(record["step"]):
                train_metrics.persist(ctx.layout)

    command = ctx.command(commands.train_sft)
    clock = time.monotonic()
    try:
        ctx.run("train", command.argv, command.env, on_line)
    finally:
        ctx.events.flush_steps()
        _append_jsonl(
            ctx.layout.attempts_file,
            {"attempt": attempt, "seconds": round(time.monotonic() - clock, 1), **timeline.facts},
        )


def export(ctx: Context) -> Outcome:
    """The trained model in Hugging Face's layout. A LoRA run's: its base and its adapter, each exported by MaxText,
    and the export is peft's merge of the two (workload/run/peft_merge.py)."""
    layout = ctx.layout
    out = layout.export_dir
    _fresh(out)
    lora = ctx.config.adapter is not None
    if lora:
        _fresh(layout.adapter_dir)
        _exported(ctx, commands.export_adapter, os.path.join(layout.adapter_dir, "adapter_config.json"))
        _fresh(layout.base_export_dir)
        base_config = _exported(ctx, commands.export_base, os.path.join(layout.base_export_dir, "config.json"))
        export_fix.fix_hidden_activation(base_config)
        merge = ctx.command(commands.merge_adapter)
        ctx.run("peft-merge", merge.argv, merge.env)
    config_path = os.path.join(out, "config.json")
    if not lora:
        _exported(ctx, commands.to_huggingface, config_path)
    elif not os.path.isfile(config_path):
        raise StepFailed(f"peft's merge exited 0 but wrote no config.json in {out}")
    changes = export_fix.fix_hidden_activation(config_path)
    record = {"config": config_path, "changes": changes}
    with open(layout.result("export-fixes.json"), "w", encoding="utf-8") as f:
        json.dump(record, f, indent=2)
    facts = {"export_dir": out, "config_fixes": changes} | ({"adapter_dir": layout.adapter_dir} if lora else {})
    return Outcome(out, facts, hashes=True)


def _exported(ctx: Context, builder, expected: str) -> str:
    """Runs one of MaxText's exports and returns `expected`, the file it must have written."""
    command = ctx.command(builder)
    ctx.run("export", command.argv, command.env)
    if not os.path.isfile(expected):
        raise StepFailed(
            f"to_huggingface exited 0 but wrote no {os.path.basename(expected)} in {os.path.dirname(expected)}"
        )
    return expected


def verify(ctx: Context) -> Outcome:
    result_path = ctx.layout.result("verify.json")
    if os.path.exists(result_path):
        os.remove(result_path)
    loads = ctx.command(commands.verify_hf)
    ctx.run("verify", loads.argv, loads.env)
    parity = ctx.command(commands.logit_parity)
    ctx.run("logit-parity", parity.argv, {**parity.env, "HF_HUB_OFFLINE": "1"})  # the export is local too
    quantised = ctx.config.adapter is not None and ctx.config.adapter.weight_qtype is not None
    if quantised:
        distance = ctx.command(commands.quantised_logit_distance)
        ctx.run("logit-distance", distance.argv, {**distance.env, "HF_HUB_OFFLINE": "1"})
    # The held-out questions may come from the Hub (the full profile's dataset): this one is not offline.
    before_after = ctx.command(commands.samples)
    ctx.run("samples", before_after.argv, before_after.env)
    with open(result_path, encoding="utf-8") as f:
        result = json.load(f)
    with open(ctx.layout.result("logit-parity.json"), encoding="utf-8") as f:
        result.update({k: v for k, v in json.load(f).items() if k not in ("ok", "problems")})
    if quantised:  # a QLoRA run's merged model on the base it trained on: reported, not bounded
        with open(ctx.layout.result(commands.QUANTISED_DISTANCE), encoding="utf-8") as f:
            figures = json.load(f)
        result |= {f"quantised_base_{k}": v for k, v in figures.items() if k.startswith(("logits_kl", "logits_top1"))}
    with open(ctx.layout.result("samples.json"), encoding="utf-8") as f:
        result["samples"] = json.load(f)
    with open(result_path, "w", encoding="utf-8") as f:
        json.dump(result, f, indent=2)
    return Outcome(result_path, {"verify": result}, hashes=True)


def keep(ctx: Context) -> Outcome:
    layout = ctx.layout
    png = layout.result("loss.png")
    ctx.run(
        "loss-curve",
        [
            ctx.python,
            "-m",
            "workload.measure.loss_curve",
            layout.metrics_file,
            png,
            "--title",
            f"{layout.run_name}: SFT loss (training, held-out) and throughput",
        ],
    )
    items = {
        "hf-model": layout.export_dir,
        "metrics": layout.train_metrics_dir,
        "tensorboard": _local_copy(layout.tensorboard_dir, layout.result("tensorboard")),
        "loss.png": png,
        "verify.json": layout.result("verify.json"),
        "samples.md": layout.result("samples.md"),
        "export-fixes.json": layout.result("export-fixes.json"),
    }
    if ctx.config.adapter is not None:  # a LoRA run keeps its adapter beside the merged model
        items[kept.ADAPTER] = layout.adapter_dir
    remote = storage.is_remote(layout.kept_dir)  # a slice keeps to the bucket: its hosts have no data disk
    partial = layout.result("kept-partial") if remote else layout.kept_dir + ".partial"
    _fresh(partial)
    os.makedirs(partial)
    for name, source in items.items():
        if os.path.isdir(source):
            shutil.copytree(source, os.path.join(partial, name))
        elif os.path.isfile(source):
            shutil.copy2(source, os.path.join(partial, name))
        else:
            raise StepFailed(f"nothing to keep at {source}")
    files = manifest(partial, hashes=True)
    # convert's facts name scratch paths that a new VM will not have: recorded are its inputs, not its facts.
    steps = {
        step: {
            "inputs": inputs,
            "facts": (markers.read(layout.marker(step)) or {}).get("facts", {})
            if step in ("train", "export", "verify")
            else {},
        }
        for step, inputs in ctx.step_fingerprints.items()
    }
    with open(os.path.join(partial, kept.MANIFEST), "w", encoding="utf-8") as f:
        record = {
            "run_name": layout.run_name,
            "settings": ctx.config.run_settings(),
            "steps": steps,
            "files": files,
            # When: what a later `pulumi up` that finds this model says of it (workload/run/phase_outcome.py).
            "kept_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        }
        # A file dataset's names, rows and sha256: what the card says of it, where a bucket path may not go.
        data = data_files.describe(ctx.config.dataset)
        record |= {} if data is None else {"data": data}
        json.dump(record, f, indent=1)
    # Swap in whole: a reader of the output dir never sees a half-copied model (in a bucket: the manifest, which
    # kept.find requires, is written last).
    outputs = layout.kept_dir
    if remote:
        storage.upload_tree(partial, layout.kept_dir, last=kept.MANIFEST)
        _fresh(partial)
        outputs = layout.result("kept.json")  # what the done-marker checks: the kept model is in the bucket
        with open(outputs, "w", encoding="utf-8") as f:
            json.dump({"kept_dir": layout.kept_dir, "files": storage.files(layout.kept_dir)}, f)
    else:
        _fresh(layout.kept_dir)
        os.replace(partial, layout.kept_dir)
    facts = {
        "kept_dir": layout.kept_dir,
        "manifest": storage.join(layout.kept_dir, kept.MANIFEST),
        "kept_files": len(files),
        "kept_bytes": sum(e["size"] for e in files),
    }
    # Only a TPU VM mounts the data disk: the copy in the bucket is what the user fetches once the VM is gone.
    if layout.kept_copy_dir is not None:
        kept.copy(layout.kept_dir, layout.kept_copy_dir)
        facts["kept_copy"] = layout.kept_copy_dir
    return Outcome(outputs, facts)


def _local_copy(url: str, local_dir: str) -> str:
    """A local copy of a tree that may be in a bucket, to keep on the data disk."""
    if not storage.is_remote(url):
        return url
    _fresh(local_dir)
    storage.download(url, local_dir)
    return local_dir


STEPS: dict[str, Callable[[Context], Outcome]] = {
    "assets": assets,
    "convert": convert,
    "train": train,
    "export": export,
    "verify": verify,
    "keep": keep,
}
