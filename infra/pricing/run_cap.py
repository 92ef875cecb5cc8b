"""The default run-time cap (`tpu-sft:maxRunHours`): Google deletes the VM after this long, whatever happens.

Derived from the run's estimate (infra/pricing/cost.py) with a margin: twice the estimate, because its figures are the
seed tutorial's, not measured on this workload; plus an hour for what it does not time (a first boot's
installs and the model's download). Rounded up to a power of two hours, because a new cap replaces the VM
(`scheduling.max_run_duration` is ForceNew), so ordinary changes of steps must not move it. Google counts it
from each start of the VM, so a VM that autostop deleted and `pulumi up` created again gets the whole cap.
"""

from __future__ import annotations

import math

from infra.pricing.cost import CostEstimate

MARGIN_FACTOR = 2
UNTIMED_HOURS = 1


def default_max_run_hours(cost: CostEstimate) -> int:
    needed = cost.run_hours * MARGIN_FACTOR + UNTIMED_HOURS
    return 2 ** math.ceil(math.log2(needed))
