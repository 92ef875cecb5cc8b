"""The eval step (docs/eval.md): the kept model and its base on the same benchmarks, compared per sample.

For each model in turn, the step starts its server on loopback (workload/eval/server.py: vLLM TPU on a VM, the
transformers stand-in for the tiny profile), runs lm-eval against it (workload/eval/harness.py), keeps lm-eval's
output and the per-sample records (workload/eval/records.py), and stops the server. Then each task's scores are
compared (workload/eval/compare.py, a paired bootstrap) and written to `<kept>/eval/report.json`:

    {"tasks": [TaskComparison.to_json(), …], "key": {the base results' cache key}, "inputs": the step's fingerprint,
     "lm_eval": VERSION, "generation": {…}, "limit": N or null, "server": {"kind": …, "version": …},
     "models": {"base": "<hub id>@<revision>", "tuned": "<kept dir>"}, "base_cached": bool,
     "seconds": {"base": S or null, "tuned": S}}

beside `base/` and `tuned/`, each with `<task>.jsonl` (`{"doc_id", "score", …}` a line) and lm-eval's own output
(`lm-eval/`: its results JSON and samples); `base/key.json` is the cache key its records were made under. The same
folder goes to the kept copy in the bucket (`<kept copy>/eval/`), or, where the model is kept in the bucket (a
slice), there.

The base model's results are cached in the bucket (`<bucket>/eval-base/<key's fingerprint>/`), keyed by the base's
revision, the tasks, the limit, lm-eval's version, the generation settings and the server: a second run with the same
key evaluates only the fine-tuned model. A report kept with the model from these same inputs is reused as it is (a
new VM after a finished run). A base whose revision is not known (no local Hub cache) is evaluated and not cached.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from typing import Any

from workload.core.accelerators import ACCELERATORS
from workload.core.eval_tasks import TASKS
from workload.core.models import MODELS
from workload.eval import compare, harness, records, server
from workload.launch.proc import StepFailed
from workload.run import storage
from workload.run.fingerprint import fingerprint
from workload.run.steps import Context, Outcome

REPORT = "report.json"
EVAL_DIR = "eval"  # in the kept model's folder
CACHE_PREFIX = "eval-base"  # in the bucket, beside the runs (outside their lifecycle rule)
CACHE_KEY = "key.json"  # the key, in the base's folder and in its cached copy (written last)
# The margin the step's own line is judged at; publishing re-judges at the stack's (TaskComparison.at_margin).
JUDGED_AT_POINTS = 2.0
MODELS_EVALUATED = ("base", "tuned")


def evaluate(ctx: Context) -> Outcome:
    config, layout = ctx.config, ctx.layout
    out = _local_dir(ctx)
    if not config.eval_tasks:  # recorded, so that publishing's gate reads "off" rather than a missing report
        shutil.rmtree(out, ignore_errors=True)
        os.makedirs(out)
        with open(os.path.join(out, REPORT), "w", encoding="utf-8") as f:
            json.dump({"off": True}, f)
        _publish(ctx, out)
        return Outcome(out, {"eval": {"off": True}}, hashes=True)
    inputs = fingerprint(eval_inputs(ctx))
    kept = _kept_report(ctx, out, inputs)
    if kept is not None:
        return Outcome(out, {"eval": _facts(kept, os.path.join(out, REPORT)) | {"kept": True}}, hashes=True)
    if ctx.eval_python is None:
        raise StepFailed("no eval venv on this host (--eval-python): run bootstrap again, which installs it")
    shutil.rmtree(out, ignore_errors=True)
    os.makedirs(out)
    if config.profile != "tiny":
        ctx.events.emit("progress", phase="eval", message=server.UNPROVEN)
    key = base_key(ctx)
    cached = _cached_base(ctx, key, out)
    seconds: dict[str, float | None] = {"base": None}
    if not cached:
        seconds["base"] = _evaluate(ctx, "base", _base_model(ctx), out)
        if key["base"] is not None:
            with open(os.path.join(out, "base", CACHE_KEY), "w", encoding="utf-8") as f:
                json.dump(key, f, indent=1)
            storage.upload_tree(os.path.join(out, "base"), cache_dir(ctx, key), last=CACHE_KEY)
    seconds["tuned"] = _evaluate(ctx, "tuned", _tuned_model(ctx), out)
    comparisons = [_compare(out, name) for name in config.eval_tasks]
    report = {
        "tasks": [c.to_json() for c in comparisons],
        "key": key,
        "inputs": inputs,
        "lm_eval": harness.LM_EVAL_VERSION,
        "generation": harness.GENERATION,
        "limit": config.eval_limit,
        "server": server_identity(ctx),
        "models": {
            "base": key["base"] or MODELS[config.model].hub_id,
            "tuned": layout.kept_dir,  # its hf-model/ is what was served
        },
        "base_cached": cached,
        "seconds": seconds,
    }
    path = os.path.join(out, REPORT)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    ctx.events.emit("progress", phase="eval", message=compare.outcome_line(comparisons))
    _publish(ctx, out)
    return Outcome(out, {"eval": _facts(report, storage.join(layout.kept_dir, EVAL_DIR, REPORT))}, hashes=True)


def eval_inputs(ctx: Context) -> dict[str, Any]:
    """The step's own inputs: its settings, what it runs and how (the kept model it evaluates is the step before's)."""
    config = ctx.config
    return {
        "settings": {
            k: v for k, v in config.phase_settings("eval").items() if k not in config.phase_settings("export")
        },
        "lm_eval": harness.LM_EVAL_VERSION,
        "generation": harness.GENERATION,
        "server": server_identity(ctx),
        "fixtures": config.profile == "tiny",
    }


def server_identity(ctx: Context) -> dict[str, str]:
    if ctx.config.profile == "tiny":
        return {"kind": "chat_server", "version": "workload/eval/chat_server.py"}
    return {"kind": "vllm", "version": f"vllm-tpu {server.VLLM_TPU_VERSION}"}


def base_key(ctx: Context) -> dict[str, Any]:
    """What the base model's results depend on; `base` None where the revision is not known (then nothing is cached)."""
    config = ctx.config
    base: str | None
    if config.profile == "tiny":
        from workload.tiny import assets as tiny

        base = f"tiny@{fingerprint(tiny.SPEC)[:12]}"
    else:
        hub_id = MODELS[config.model].hub_id
        revision = _hub_revision(ctx.layout.hf_home, hub_id)
        base = None if revision is None else f"{hub_id}@{revision}"
    return {
        "base": base,
        "tasks": list(config.eval_tasks),
        "limit": config.eval_limit,
        "lm_eval": harness.LM_EVAL_VERSION,
        "generation": harness.GENERATION,
        "server": server_identity(ctx),
    }


def cache_dir(ctx: Context, key: dict[str, Any]) -> str:
    """Beside the runs (`gs://<bucket>/eval-base/…` on a VM), else beside the kept models."""
    root = ctx.layout.runs_dir or ctx.layout.output_dir
    parent = root.rstrip("/").rsplit("/", 1)[0]
    return storage.join(parent, CACHE_PREFIX, fingerprint(key)[:32])


def _hub_revision(hf_home: str, hub_id: str) -> str | None:
    """The commit bootstrap downloaded (the Hub cache's refs/main), None where the cache has none."""
    ref = os.path.join(hf_home, "hub", "models--" + hub_id.replace("/", "--"), "refs", "main")
    try:
        with open(ref, encoding="utf-8") as f:
            return f.read().strip() or None
    except OSError:
        return None


def _local_dir(ctx: Context) -> str:
    """Where the step writes: the kept model's own folder on the data disk, else scratch (uploaded afterwards)."""
    if storage.is_remote(ctx.layout.kept_dir):
        return ctx.layout.result(EVAL_DIR)
    return os.path.join(ctx.layout.kept_dir, EVAL_DIR)


def _kept_report(ctx: Context, out: str, inputs: str) -> dict[str, Any] | None:
    """The report kept with the model, where these same inputs made it (a new VM after a finished run)."""
    kept = storage.join(ctx.layout.kept_dir, EVAL_DIR)
    text = storage.read_text(storage.join(kept, REPORT))
    try:
        report = None if text is None else json.loads(text)
    except ValueError:
        return None
    if not isinstance(report, dict) or report.get("inputs") != inputs:
        return None
    if storage.is_remote(kept):
        shutil.rmtree(out, ignore_errors=True)
        storage.download(kept, out)
    return report


def _cached_base(ctx: Context, key: dict[str, Any], out: str) -> bool:
    if key["base"] is None:
        return False
    cached = cache_dir(ctx, key)
    text = storage.read_text(storage.join(cached, CACHE_KEY))  # written last: the records are all there
    try:
        if text is None or json.loads(text) != key:
            return False
    except ValueError:
        return False
    storage.download(cached, os.path.join(out, "base"))
    ctx.events.emit("progress", phase="eval", message=f"base model's results from the cache: {cached}")
    return True


def _base_model(ctx: Context) -> str:
    if ctx.config.profile == "tiny":
        from workload.tiny import assets as tiny

        model = os.path.join(ctx.layout.tiny_dir, tiny.MODEL_SUBDIR)
        if not os.path.isdir(model):
            raise StepFailed(f"the tiny base model is not in {model}: run the assets step again")
        return model
    return MODELS[ctx.config.model].hub_id


def _tuned_model(ctx: Context) -> str:
    """The kept export, on local disk."""
    kept = storage.join(ctx.layout.kept_dir, "hf-model")
    if not storage.is_remote(kept):
        return kept
    local = ctx.layout.result("eval-model")
    shutil.rmtree(local, ignore_errors=True)
    storage.download(kept, local)
    return local


def _served(ctx: Context, name: str, model: str) -> server.Served:
    assert ctx.eval_python is not None
    if ctx.config.profile == "tiny":
        return server.chat_server(ctx.python, model, name=name)
    revision = None
    if name == "base":
        revision = _hub_revision(ctx.layout.hf_home, model)
    accelerator = ACCELERATORS[ctx.config.accelerator_type]
    return server.vllm(
        ctx.eval_python, model, name=name, revision=revision, chips=accelerator.chips // accelerator.hosts
    )


def _evaluate(ctx: Context, name: str, model: str, out: str) -> float:
    """Serves `model`, runs lm-eval on it, keeps its output and the records under `out/<name>/`; the seconds taken."""
    assert ctx.eval_python is not None
    started = time.monotonic()
    served = _served(ctx, name, model)
    where = os.path.join(out, name)
    lm_eval_out = os.path.join(where, "lm-eval")
    fixtures = os.path.join(ctx.package_root, harness.FIXTURES) if ctx.config.profile == "tiny" else None
    env = {**ctx.base_env, "HF_HOME": ctx.layout.hf_home, "PYTHONPATH": ctx.package_root}
    log = os.path.join(ctx.layout.logs_dir, f"eval-server-{name}-{time.strftime('%Y%m%d-%H%M%S')}.log")
    ctx.log_paths.append(log)
    ctx.events.emit("progress", phase="eval", message=f"serving the {name} model ({served.kind}): {model}")
    with server.serving(served, env, log, ctx.layout.work_dir) as pid:
        argv = harness.argv(
            ctx.eval_python,
            served,
            ctx.config.eval_tasks,
            output_dir=lm_eval_out,
            limit=ctx.config.eval_limit,
            fixtures_dir=fixtures,
            server_pid=pid,
            server_log=log,
        )
        ctx.events.emit("progress", phase="eval", message=f"lm-eval on the {name} model")
        ctx.run(f"lm-eval-{name}", argv, {"HF_HOME": ctx.layout.hf_home})
    for task in ctx.config.eval_tasks:
        lm_eval_task = harness.lm_eval_tasks((task,), fixtures is not None)[0]
        try:
            records.write(os.path.join(where, f"{task}.jsonl"), records.read(lm_eval_out, TASKS[task], lm_eval_task))
        except records.RecordsMissing as missing:
            raise StepFailed(str(missing)) from None
    seconds = round(time.monotonic() - started, 1)
    ctx.events.emit("progress", phase="eval", message=f"the {name} model evaluated in {seconds:.0f} s")
    return seconds


def _compare(out: str, task: str) -> compare.TaskComparison:
    base, tuned = (records.load(os.path.join(out, model, f"{task}.jsonl")) for model in MODELS_EVALUATED)
    if [r["doc_id"] for r in base] != [r["doc_id"] for r in tuned]:
        raise StepFailed(f"{task}: the base and the fine-tuned model were scored on different samples")
    spec = TASKS[task]
    return compare.compare(
        task,
        spec.metric,
        [r["score"] for r in base],
        [r["score"] for r in tuned],
        margin_points=JUDGED_AT_POINTS,
    )


def _publish(ctx: Context, out: str) -> None:
    """The eval folder beside the kept model's copy in the bucket (or in the bucket, where the model is kept)."""
    layout = ctx.layout
    if storage.is_remote(layout.kept_dir):
        storage.upload_tree(out, storage.join(layout.kept_dir, EVAL_DIR), last=REPORT)
    elif layout.kept_copy_dir is not None:
        storage.upload_tree(out, storage.join(layout.kept_copy_dir, EVAL_DIR), last=REPORT)


def _facts(report: dict[str, Any], path: str) -> dict[str, Any]:
    return {
        "report": path,
        "tasks": report["tasks"],
        "base_cached": report.get("base_cached", False),
        "seconds": report.get("seconds"),
        "limit": report.get("limit"),
    }
