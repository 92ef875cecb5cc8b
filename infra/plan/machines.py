"""What the same run would cost on each machine of one VM, beside the stack's own (the preview's `machineCosts`): a
v6e-1 (`ct6e-standard-1t`), a v6e-4 (`ct6e-standard-4t`) and a v6e-8 (`ct6e-standard-8t`). The run there is the stack
with that `tpu-sft:acceleratorType` (what `scripts/preflight tpu-sft:acceleratorType=…` compiles), trained on the
stack's own tokens: its steps are those tokens over that machine's tokens a step, whatever form the stack's length
was given in (the default length is per chip, and a step count trains more tokens on more chips). Each is timed as the
stack's own run is (infra/plan/throughput.py: the preflight's record of those train inputs, the bench's table, or the
seed's figure) and priced at its chips × the stack's price of a chip-hour (a v6e chip-hour is one price whatever the
machine: infra/pricing/cost.py). A LoRA run holds no optimizer state for the frozen weights, so a machine of fewer
chips may take it (docs/tuning.md); whether it does is the preflight's word alone.

So a machine shows its cost only where no preflight of exactly those train inputs found that the step does not fit:
one that did shows that verdict in one line and no cost, and one that nothing compiled yet says how to get the verdict.
Nothing here decides a fit by itself.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from infra.config.settings import Settings
from infra.plan.throughput import predicted
from infra.preflight.compile_step import known_record, summary
from infra.pricing.cost import estimate
from infra.pricing.eval_cost import eval_hours
from workload.core.accelerators import ACCELERATORS
from workload.core.run_length import steps_for


def compared(s: Settings) -> tuple[str, ...]:
    """The machines a preview prices the run on: every accelerator type of one VM, and the stack's own."""
    return tuple(name for name, a in ACCELERATORS.items() if not a.is_slice or name == s.accelerator.name)


def costs(s: Settings) -> dict[str, dict[str, Any]]:
    """Each compared machine: what it is, the preflight's verdict on the run there, and the run's time and cost there
    (None where the preflight found that the step does not fit)."""
    return {name: _on(s, name) for name in compared(s)}


def _on(s: Settings, name: str) -> dict[str, Any]:
    accelerator = ACCELERATORS[name]
    pipeline = replace(s.pipeline, accelerator_type=name)
    tokens = s.pipeline.steps * s.pipeline.tokens_per_step  # the stack's run's, a partial last step trained whole
    steps = steps_for(tokens, pipeline.tokens_per_step)
    record = known_record(pipeline)
    fits = None if record is None else bool(record["fits"])
    verdict = (
        f"not compiled yet: scripts/preflight tpu-sft:acceleratorType={name} says whether it fits"
        if record is None
        else summary(record)
    )
    shown: dict[str, Any] = {
        "machineType": accelerator.machine_type,
        "chips": accelerator.chips,
        "topology": accelerator.topology,
        "chosen": name == s.accelerator.name,
        "fits": fits,
        "preflight": verdict,
        "steps": steps,
        "tokens": steps * pipeline.tokens_per_step,
    }
    if fits is False:
        return shown | {"hourlyCostUsd": None, "estimatedRunHours": None, "estimatedRunCostUsd": None, "timedBy": None}
    throughput = predicted(pipeline)
    cost = estimate(
        accelerator.chips, s.tpu_price.usd_per_chip_hour, steps, throughput.step_seconds, eval_hours(pipeline)
    )
    return shown | {
        "hourlyCostUsd": cost.hourly_usd,
        "estimatedRunHours": cost.run_hours,
        "estimatedRunCostUsd": cost.run_usd,
        "timedBy": throughput.source,
    }


def line(s: Settings) -> str:
    """The plan comment's line: the run's cost on each other machine, or the preflight's word that it does not fit."""
    shown = []
    for name, m in costs(s).items():
        if m["chosen"]:
            continue
        machine = f"{name} ({m['machineType']})"
        if m["fits"] is False:
            shown.append(f"{machine}: {m['preflight']}")
        else:
            shown.append(f"{machine} ${m['estimatedRunCostUsd']:.2f}" + ("" if m["fits"] else ", not compiled yet"))
    return f"The same tokens on another machine: {'; '.join(shown)}."
