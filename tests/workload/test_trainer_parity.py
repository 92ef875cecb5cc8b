"""The two trainer loops (`tpu-sft:trainer`, workload/core/trainer_loop.py) train alike: both start from the same
converted tiny checkpoint (the session's `tiny_converted`), on the same data, with completion-only masking and packing
(post_train/sft.yml, which both read), at the same learning rate, with the runner's own commands. Both stop after
training: each loop's export and verify are another run's, MaxText's own loop's the rehearsals' (the default trainer:
tests/e2e, the fresh-VM and slice rehearsals) and Tunix's the tiny pipeline's (tests/workload/test_tiny_pipeline.py).
Both runs go at once: each is mostly one process's imports and compiles."""

from __future__ import annotations

import json
import math
import subprocess
import time
from pathlib import Path

import pytest

from tests.workload.tiny_run import REPO, STEP_LIMIT_S, TINY_SETTINGS, copy_converted, parse_events, workload_argv

STEPS = 20
# A held-out pass before the first update and one after the last, so the loops' base-model losses compare too: one
# batch each, as the loops average several differently (docs/trainer.md); a checkpoint mid-run.
SETTINGS = {**TINY_SETTINGS, "steps": STEPS, "evalInterval": STEPS, "evalSteps": 1, "checkpointPeriod": 10}
FIRST_STEP_RTOL = 1e-3
# Every one of the 20 updates' losses within 5e-4 relative, about 0.004 at these losses (8.0-9.1). Why that bound:
# - MaxText logs a loss with 3 decimals, so two equal losses can read 0.001 apart (1.2e-4 relative here) from rounding;
# - the loops' float32 CPU arithmetic differs only in the order of its reductions (Flax linen against NNX), rounding
#   at 1e-7 relative that Adam's normalised updates carry into the weights and later steps compound. Measured here
#   (2026-12-06, the tiny model's 8,192-token vocabulary): 18 of 20 losses equal as logged, 2 one unit of the last
#   decimal apart (1.25e-4 relative), so the bound leaves four times the drift seen for other CPUs, thread counts
#   and XLA versions;
# - a real difference moves more: consecutive updates' losses here differ by 0.011 to 0.24, so another batch, an
#   update out of step by one, or a different mask or packing shows beyond the bound.
STEPS_RTOL = 5e-4


def _run_both(maxtext_python: str, tiny_converted: Path, tmp: Path) -> dict[str, tuple[dict, list[dict]]]:
    started = {}
    for trainer in ("native", "tunix"):
        work, config = tmp / trainer / "work", tmp / trainer / "settings.json"
        copy_converted(tiny_converted, work)
        config.write_text(json.dumps({**SETTINGS, "trainer": trainer}))
        argv = workload_argv(maxtext_python, config, work, tmp / trainer / "out", "--until", "train")
        started[trainer] = (work, subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE))
    deadline = time.monotonic() + STEP_LIMIT_S
    results = {}
    for trainer, (work, process) in started.items():
        stdout, stderr = process.communicate(timeout=max(deadline - time.monotonic(), 1))
        events = parse_events(stdout.decode())
        assert process.returncode == 0, f"{trainer}: {events[-1]}\n{stderr.decode()[-3000:]}"
        (steps_file,) = work.glob("train-metrics/*/train_steps.jsonl")
        records = [json.loads(line) for line in steps_file.read_text().splitlines()]
        results[trainer] = (events[-1], records)
    return results


@pytest.fixture(scope="module")
def both_loops(maxtext_python, tiny_converted, tmp_path_factory) -> dict[str, tuple[dict, list[dict]]]:
    return _run_both(maxtext_python, tiny_converted, tmp_path_factory.mktemp("trainer-parity"))


def _losses(records: list[dict]) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in records if "loss" in r}


def test_both_loops_log_every_update_counted_alike(both_loops):
    """The runner counts updates done, whichever loop numbered them: MaxText's own loop logs 0 after the first."""
    for summary, records in both_loops.values():
        assert sorted(_losses(records)) == list(range(1, STEPS + 1))
        assert summary["final_step"] == STEPS and math.isfinite(summary["final_loss"])


def test_the_first_updates_loss_agrees_within_a_thousandth(both_loops):
    native, tunix = (_losses(both_loops[t][1])[1] for t in ("native", "tunix"))
    assert native == pytest.approx(tunix, rel=FIRST_STEP_RTOL)


def test_twenty_updates_losses_agree_within_the_stated_tolerance(both_loops):
    native, tunix = (_losses(both_loops[t][1]) for t in ("native", "tunix"))
    far = {s: (native[s], tunix[s]) for s in native if native[s] != pytest.approx(tunix[s], rel=STEPS_RTOL)}
    assert not far, f"steps whose losses differ by more than {STEPS_RTOL:.2%}: {far}"
    assert native[STEPS] < native[1]  # and the loss fell: both trained, not both stood still


def test_each_loop_names_its_own_checkpoint_layout_for_export(both_loops):
    """MaxText's own loop keeps its whole TrainState as checkpoints/<updates - 1>/items; Tunix's parameters are
    checkpoints/<updates>/model_params. The run names that one for export, and it is there. That export loads it and
    verify passes is each loop's other run's to show (the module's docstring)."""
    for trainer, kept in (("native", f"{STEPS - 1}/items"), ("tunix", f"{STEPS}/model_params")):
        summary = both_loops[trainer][0]
        assert summary["ok"] and "verify" not in summary, summary
        assert summary["trained_checkpoint"].endswith(f"/checkpoints/{kept}"), summary
        assert Path(summary["trained_checkpoint"]).is_dir(), summary


def test_both_loops_measure_the_base_model_and_the_trained_one_on_the_same_held_out_batch(both_loops):
    """MaxText's own loop has no pass before its first update: the trainer's launcher adds it
    (workload/launch/native_held_out.py), so 'did it learn' compares the same two models whichever loop trained."""
    native, tunix = both_loops["native"][0], both_loops["tunix"][0]
    for summary in (native, tunix):
        assert (summary["eval_loss_first_step"], summary["eval_loss_final_step"]) == (0, STEPS)
        assert summary["learned"] is True
    assert native["eval_loss_first"] == pytest.approx(tunix["eval_loss_first"], rel=FIRST_STEP_RTOL)
    assert native["eval_loss_final"] == pytest.approx(tunix["eval_loss_final"], rel=STEPS_RTOL)
