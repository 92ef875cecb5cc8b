"""Where a run stands, read back from its event lines (workload/run/run_state.py): the line `status` prints."""

from tests.remote.stack_commands import FINISHED, RUNNING, event
from workload.run import run_state


def line(lines) -> str:
    return run_state.read(lines).line()


def test_each_stage_of_a_run_in_one_line():
    assert line([]) == "starting: no step has begun"
    assert line(RUNNING[:1]) == "between steps: convert done"
    assert line(RUNNING[:2]) == "train running"
    assert line(["Traceback (most recent call last):", *RUNNING]) == (
        "train running · step 3/10 · loss 1.2345 · ETA 1 min 10 s"
    )
    assert line([*RUNNING, *FINISHED]) == (
        "finished: every step up to keep done (step 10, loss 1.1000, model kept in /kept/run-a)"
    )
    failed = event("summary", ok=False, failed_step="train", error="RESOURCE_EXHAUSTED: out of HBM")
    assert line([*RUNNING, failed]) == "failed in train: RESOURCE_EXHAUSTED: out of HBM"


def test_a_parts_summary_is_not_the_runs_end():
    """The run prints a summary as each phase task's part ends (convert's, train's), and goes on."""
    convert_part = event("summary", ok=True, until="convert", failed_step=None)
    assert (
        line([*RUNNING[:1], convert_part, *RUNNING[1:]]) == "train running · step 3/10 · loss 1.2345 · ETA 1 min 10 s"
    )
    assert line([*RUNNING, convert_part, *FINISHED]).startswith("finished: every step up to keep done")
