"""lm-eval's invocation, the same for the base model and the fine-tuned one: lm-eval 0.4.13's `local-chat-completions`
against the server of workload/eval/server.py, through its own CLI (workload/eval/lm_eval_offline.py keeps NLTK off
the network). What lm-eval is given (lm_eval/models/api_models.py, openai_completions.py; lm_eval/_cli/run.py):

- `base_url`: the server's chat completions URL; `model`: the name it serves the model by;
- `tokenized_requests=False`: the server applies the model's own chat template to the messages (vLLM from the
  model's tokenizer; the rehearsal's stand-in through transformers), and lm-eval needs no tokenizer;
- `--apply_chat_template` (messages, not a flat prompt) and `--fewshot_as_multiturn` (GSM8K's examples as earlier
  turns of the conversation);
- `num_concurrent`: requests in flight (vLLM batches them; the stand-in answers one at a time);
- `max_gen_toks`: new tokens for a task that sets none (GSM8K; IFEval sets 1,280), `max_length` the context;
- `--log_samples` and `--output_path`: the per-sample records (workload/eval/records.py); `--limit`: a quick run.
"""

from __future__ import annotations

from workload.core.eval_tasks import TASKS
from workload.eval.server import MAX_MODEL_LEN, READY_TIMEOUT_S, Served

LM_EVAL_VERSION = "0.4.13"  # the pin in both eval locks (tests/workload/eval checks they agree)
FIXTURES = "workload/eval/fixtures"  # relative to the package root: the rehearsal's tasks
# What both models are asked with: part of the base results' cache key (workload/run/eval_step.py). Each task's own
# generation settings (greedy, its stop strings, IFEval's 1,280 tokens) come with lm-eval's version, also in the key.
GENERATION = {
    "chat_template": "the model's own",
    "fewshot_as_multiturn": True,
    "max_gen_toks": 512,  # lm-eval's default is 256, which cuts an instruct model's worked GSM8K answer short
    "max_length": MAX_MODEL_LEN,
}
NUM_CONCURRENT = {"vllm": 32, "chat_server": 1}


def lm_eval_tasks(names: tuple[str, ...], fixtures: bool) -> list[str]:
    """lm-eval's task names for the settings' names: the real tasks, or the rehearsal's fixtures."""
    return [TASKS[n].fixture if fixtures else TASKS[n].lm_eval_task for n in names]


def argv(
    python: str,
    served: Served,
    names: tuple[str, ...],
    *,
    output_dir: str,
    limit: int | None,
    fixtures_dir: str | None,
    server_pid: int,
    server_log: str,
) -> list[str]:
    """The command that evaluates the model `served` serves (its server started as `server_pid`, logging to
    `server_log`) on `names`; `fixtures_dir`: the rehearsal's tasks."""
    model_args = {
        "base_url": served.base_url,
        "model": served.name,
        "tokenized_requests": False,
        "num_concurrent": NUM_CONCURRENT[served.kind],
        "max_gen_toks": GENERATION["max_gen_toks"],
        "max_length": GENERATION["max_length"],
        "max_retries": 3,
        "timeout": 600,
    }
    wrapper = [python, "-m", "workload.eval.lm_eval_offline", "--wait-for", served.models_url]
    wrapper += ["--server-pid", str(server_pid), "--server-log", server_log]
    wrapper += ["--wait-s", f"{READY_TIMEOUT_S[served.kind]:g}"]
    if fixtures_dir is None and "ifeval" in names:
        wrapper.append("--require-punkt")
    if fixtures_dir is not None:
        wrapper += ["--chdir", fixtures_dir]
    args = ["run", "--model", "local-chat-completions"]
    args += ["--model_args", ",".join(f"{k}={v}" for k, v in model_args.items())]
    args += ["--tasks", ",".join(lm_eval_tasks(names, fixtures_dir is not None))]
    args += ["--apply_chat_template", "--fewshot_as_multiturn", "--log_samples", "--output_path", output_dir]
    if fixtures_dir is not None:
        args += ["--include_path", fixtures_dir]
    if limit is not None:
        args += ["--limit", str(limit)]
    return [*wrapper, *args]
