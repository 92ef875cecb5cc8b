"""The default run-time cap (`tpu-sft:maxRunHours`): Google deletes the VM after this long, whatever happens.

Not by default for RESERVATION_BOUND (`capped_by_default`): Google's texts give such a VM the reservation's life, not a
run cap. "About VMs that use the reservation-bound model" (cloud.google.com/compute/docs/instances/
about-reservation-bound-vms): "based on the termination action that you specify when creating VMs, Compute Engine
stops or deletes the VM at the end of the reservation period"; the Compute API's provisioning models, as Batch's
`AllocationPolicy.ProvisioningModel` quotes them: RESERVATION_BOUND "Bound to the lifecycle of the reservation in which
it is provisioned", FLEX_START "has limited max run duration". No Google text read (those two, "Limit the run time of a
VM", the calendar-mode reservation pages of Compute Engine and Cloud TPU; 2026-12) says that a reservation-bound VM
accepts one; the seed's `gcloud` sets none. It would save nothing either: the reservation bills its whole period, used
or not (docs/costs.md). Autostop still deletes an idle one; `tpu-sft:maxRunHours N` still sets a cap on it.

For the other models the cap is derived from the run's estimate (infra/pricing/cost.py) with a margin: twice the
estimate, because its figures are the seed tutorial's, not measured on this workload; plus an hour for what it does
not time (a first boot's installs and the model's download). Rounded up to a power of two hours, because a new cap
replaces the VM (`scheduling.max_run_duration` is ForceNew), so ordinary changes of steps must not move it. Google
counts it from each start of the VM, so a VM that autostop deleted and `pulumi up` created again gets the whole cap.
"""

from __future__ import annotations

import math

from infra.pricing.cost import CostEstimate

MARGIN_FACTOR = 2
UNTIMED_HOURS = 1
UNCAPPED_BY_DEFAULT = ("RESERVATION_BOUND",)  # the reservation's period ends these VMs (above)


def capped_by_default(provisioning_model: str) -> bool:
    return provisioning_model not in UNCAPPED_BY_DEFAULT


def default_max_run_hours(cost: CostEstimate) -> int:
    needed = cost.run_hours * MARGIN_FACTOR + UNTIMED_HOURS
    return 2 ** math.ceil(math.log2(needed))
