"""What the eval phase adds to a run, before anything is spent: an estimate, not a measurement.

The figures are issue 73's, for a v6e-8 and not yet measured here (docs/eval.md says what no test proves): one to three
minutes a task a model once vLLM serves it, and three to five minutes to load and compile each model. The eval serves
the base and then the fine-tuned model; where the base's scores are cached in the bucket (same base revision, tasks,
limit, lm-eval and generation settings) only the fine-tuned model is served. A preview cannot see the bucket, so it
shows both, and the run's hours (which size the run cap: infra/pricing/run_cap.py) take the first run's upper end.
A sample limit scales a task's minutes by the share of its samples it runs; loading does not shrink with it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from workload.core.config import PipelineConfig

TASK_MINUTES = (1.0, 3.0)  # a whole task, one model, a v6e-8, once served (issue 73's figure)
LOAD_MINUTES = (3.0, 5.0)  # one model: vLLM's load and compile (issue 73's figure)
# A task's samples (lm-eval 0.4.13's datasets, as issue 73 counts them): a limit runs its share of the task's minutes.
SAMPLES = {"ifeval": 541, "gsm8k": 1319}
BASIS = (
    "an estimate from issue 73's figures for a v6e-8, not measured: 1-3 min a task a model once served, 3-5 min to "
    "load and compile each model"
)


@dataclass(frozen=True)
class EvalEstimate:
    tasks: tuple[str, ...]
    limit: int | None  # samples of each task; None: all

    def task_minutes(self, task: str) -> tuple[float, float]:
        """One model's minutes on `task`: its share of the whole task's figure under the limit."""
        samples = SAMPLES.get(task)
        share = 1.0 if self.limit is None or samples is None else min(1.0, self.limit / samples)
        low, high = TASK_MINUTES
        return round(low * share, 2), round(high * share, 2)

    def minutes(self, models: int) -> tuple[float, float]:
        """`models` served (2: base and fine-tuned; 1: the base's scores cached), each loaded, then every task."""
        low = models * (LOAD_MINUTES[0] + sum(self.task_minutes(t)[0] for t in self.tasks))
        high = models * (LOAD_MINUTES[1] + sum(self.task_minutes(t)[1] for t in self.tasks))
        return round(low, 1), round(high, 1)

    @property
    def hours(self) -> float:
        """What the run's estimate adds: a first run's (nothing cached) upper end."""
        return round(self.minutes(2)[1] / 60, 3)

    def output(self, hourly_usd: float) -> dict[str, Any]:
        """The preview's `evalEstimate`: per task and per model, a first run and one with the base's scores cached."""

        def case(models: int) -> dict[str, Any]:
            low, high = self.minutes(models)
            return {
                "models": models,
                "minutes": [low, high],
                "usd": [round(hourly_usd * low / 60, 2), round(hourly_usd * high / 60, 2)],
            }

        return {
            "tasks": {t: {"minutesPerModel": list(self.task_minutes(t)), "samples": self.limit} for t in self.tasks},
            "loadMinutesPerModel": list(LOAD_MINUTES),
            "firstRun": case(2),
            "baseCached": case(1),
            "basis": BASIS,
        }

    def line(self, hourly_usd: float) -> str:
        """The plan comment's line."""
        first, cached = self.output(hourly_usd)["firstRun"], self.output(hourly_usd)["baseCached"]
        tasks = ", ".join(
            f"{t} {low:g}-{high:g} min a model" for t in self.tasks for low, high in [self.task_minutes(t)]
        )
        limit = "" if self.limit is None else f", {self.limit} samples a task"
        return (
            f"Eval ({tasks}{limit}): {first['minutes'][0]:g}-{first['minutes'][1]:g} min (${first['usd'][1]:.2f} at "
            f"most) serving both models, {cached['minutes'][0]:g}-{cached['minutes'][1]:g} min with the base's scores "
            f"cached ({BASIS})."
        )


def eval_of(pipeline: PipelineConfig) -> EvalEstimate | None:
    """The eval the pipeline's settings ask for (tpu-sft:evalTasks, evalLimit), or None: evalTasks off."""
    return EvalEstimate(pipeline.eval_tasks, pipeline.eval_limit) if pipeline.eval_tasks else None


def eval_hours(pipeline: PipelineConfig) -> float:
    """What the eval adds to the run's hours (0 without one)."""
    estimate = eval_of(pipeline)
    return 0.0 if estimate is None else estimate.hours
