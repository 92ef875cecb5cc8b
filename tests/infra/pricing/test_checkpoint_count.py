"""How many checkpoints a run leaves in the bucket, as each loop saves them (docs/trainer.md, "Resume"): MaxText's own
loop at every index that is a multiple of the period, index 0 among them, and the final state; Tunix's after every
period-th update and the last."""

import pytest

from infra.pricing.cost import checkpoints_per_run


@pytest.mark.parametrize(
    ("steps", "period", "native", "tunix"),
    [
        (250, 63, 5, 4),  # the example stack: indices 0, 63, 126, 189, 249; updates 63, 126, 189, 250
        (253, 63, 5, 5),  # the final index, 252, is a multiple: saved once
        (64, 63, 2, 2),
        (1, 63, 1, 1),
        (250, None, 1, 1),  # unset: the final one only
    ],
)
def test_each_loop_saves_where_it_does(steps, period, native, tunix):
    assert checkpoints_per_run(steps, period, "native") == native
    assert checkpoints_per_run(steps, period, "tunix") == tunix
