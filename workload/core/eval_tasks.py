"""The benchmarks the eval phase may run (workload/eval/), by the name a user sets in `tpu-sft:evalTasks`: lm-eval's
task, the metric the quality gate compares per sample, and the ones kept beside it. Standard library only: the
settings (workload/core/config.py) refuse an unknown name before anything bills.

Only generation tasks: prompt log-probabilities reached tpu-inference in May 2026 and crashed for some architectures
in July (docs/eval.md, "Why these tasks").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class EvalTask:
    lm_eval_task: str  # lm-eval 0.4.13's task name
    metric: str  # the gate's metric, as lm-eval names it in a logged sample
    filter: str  # the filter whose output `metric` scores ("none": the task has no filter list)
    also: tuple[str, ...] = ()  # other per-sample metrics kept in the records (not gated)
    fixture: str = ""  # the rehearsal's task in the same format (workload/eval/fixtures/)
    samples: int = 0  # how many the whole task scores: a result on fewer (tpu-sft:evalLimit) says so


TASKS = {
    # 541 prompts; prompt-level strict accuracy: every instruction of the prompt followed, as written.
    "ifeval": EvalTask("ifeval", "prompt_level_strict_acc", "none", ("prompt_level_loose_acc",), "tpu_sft_ifeval", 541),
    # 1,319 questions; exact match of the number after `####` (lm-eval's strict-match filter).
    "gsm8k": EvalTask("gsm8k", "exact_match", "strict-match", (), "tpu_sft_gsm8k", 1319),
}
DEFAULT_TASKS = ("ifeval", "gsm8k")
OFF = "off"
