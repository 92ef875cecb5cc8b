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


def test_the_eval_step_shows_what_it_does_and_then_both_models_scores():
    """`tpu-sft status` while the benchmarks run, and once they have (docs/eval.md)."""
    evaluating = [
        event("phase", phase="keep", status="done", seconds=1.0),
        event("phase", phase="eval", status="start", reason="not done yet"),
        event("progress", phase="eval", message="lm-eval on the base model"),
    ]
    assert line(evaluating) == "eval running · lm-eval on the base model"
    ifeval = {"task": "ifeval", "metric": "prompt_level_strict_acc", "n": 541, "base": 0.78, "tuned": 0.80}
    ifeval |= {"delta": 0.02, "low": 0.001, "high": 0.039, "margin_points": 2.0, "worse": False}
    done = event("summary", ok=True, until="eval", final_step=10, kept_dir="/kept/run-a", eval={"tasks": [ifeval]})
    assert line([*evaluating, done]) == (
        "finished: every step up to eval done (step 10, model kept in /kept/run-a) · "
        "eval: IFEval strict 0.78 → 0.80 (+2.0 ± 1.9)"
    )
    off = event("summary", ok=True, until="eval", final_step=10, eval={"off": True})
    assert line([off]).endswith("(step 10) · eval: off (tpu-sft:evalTasks off)")
