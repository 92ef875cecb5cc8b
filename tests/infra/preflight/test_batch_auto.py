"""`tpu-sft:perDeviceBatchSize auto`: the stack trains with the largest batch a sweep of its train inputs found
(infra/preflight/compile_step.py `take_the_sweeps_batch`), as if that number were set by hand; without a sweep on file
nothing is declared. The sweep's record is written here in the form `scripts/preflight --sweep` keeps (the real sweep:
tests/workload/preflight/test_preflight.py)."""

from __future__ import annotations

import json
import sys

import pytest
from pulumi import RunError

from infra.config.read_settings import parse
from infra.plan.reruns import load, plan
from infra.plan.reruns import main as plan_main
from infra.preflight import compile_step
from rehearsal.engine import Stack, run_program
from tests.fixtures.mock_engine import recorded_inputs
from workload.core.config import ConfigError
from workload.core.contract import PIPELINE_ENV
from workload.run.commands import run_name

AUTO = {"tpu-sft:perDeviceBatchSize": "auto"}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(compile_step, "CACHE", tmp_path / "preflight")
    return tmp_path / "preflight"


def settings_of(config):
    return parse(config, stack="dev")


def swept(config, batch, cache, levers=None) -> dict:
    """What `scripts/preflight --sweep` keeps for `config`'s train inputs: the configuration it chose (a row of
    infra/preflight/candidates.py `ranked`), or none."""
    path = compile_step.sweep_path(settings_of(config).pipeline)
    row = {"tokens_per_s_per_chip": 9000.0, "mfu": 0.52, "step_s": 1.82, "bound": "compute"}
    chosen = (
        None if batch is None else {**row, "levers": levers or {"trainer": "native"}, "per_device_batch_size": batch}
    )
    answer = {"chosen": chosen, "runner_up": None, "sweep_fingerprint": path.stem.removeprefix("sweep-")}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(answer))
    return answer


def test_auto_takes_the_sweeps_batch_as_if_set_by_hand(dev_config, cache):
    config = {**dev_config, **AUTO}
    swept(config, 8, cache)
    auto = compile_step.take_the_sweeps_batch(settings_of(config))
    by_hand = settings_of({**dev_config, "tpu-sft:perDeviceBatchSize": "8"})
    assert auto.pipeline == by_hand.pipeline and auto.batch_auto is False
    assert run_name(auto.pipeline) == run_name(by_hand.pipeline)  # the same run, and so the same re-runs
    stack = run_program(config)
    declared = recorded_inputs(stack)
    assert json.loads(declared["train"]["environment"][PIPELINE_ENV])["perDeviceBatchSize"] == 8
    by_hand_stack = run_program({**dev_config, "tpu-sft:perDeviceBatchSize": "8"})
    assert declared == recorded_inputs(by_hand_stack)
    assert "sweepChoice" not in by_hand_stack.outputs  # None: a batch set by hand chooses nothing


def test_auto_takes_the_chosen_levers_and_the_preview_names_the_choice_and_the_runner_up(dev_config, cache):
    config = {**dev_config, **AUTO}
    path = compile_step.sweep_path(settings_of(config).pipeline)
    row = {"tokens_per_s_per_chip": 9000.0, "mfu": 0.52, "step_s": 1.82, "bound": "compute"}
    chosen = {**row, "levers": {"trainer": "native", "vocabTiling": 4}, "per_device_batch_size": 8}
    runner_up = {**row, "levers": {"trainer": "native"}, "per_device_batch_size": 4, "tokens_per_s_per_chip": 8000.0}
    answer = {"chosen": chosen, "runner_up": runner_up, "sweep_fingerprint": path.stem.removeprefix("sweep-")}
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(answer))
    auto = compile_step.take_the_sweeps_batch(settings_of(config)).pipeline
    assert (auto.per_device_batch_size, auto.vocab_tiling, auto.remat_policy) == (8, 4, None)
    assert run_program(config).outputs["sweepChoice"] == {
        "chosen": "trainer native, vocabTiling 4, perDeviceBatchSize 8: 9,000 tokens/s per chip, 52.0% MFU predicted "
        "(1820 ms a step, compute-bound)",
        "runnerUp": "trainer native, perDeviceBatchSize 4: 8,000 tokens/s per chip, 52.0% MFU predicted "
        "(1820 ms a step, compute-bound)",
    }


def test_auto_without_a_sweep_declares_nothing_and_says_how_to_make_one(dev_config, cache):
    declared = Stack()
    with pytest.raises(RunError) as raised:
        run_program({**dev_config, **AUTO}, into=declared)
    message = str(raised.value)
    assert message.startswith("tpu-sft:perDeviceBatchSize: is auto, which takes a sweep's answer, and no sweep")
    assert "Fix: run scripts/preflight --sweep" in message and "\n" not in message
    assert declared.resources == []


def test_auto_when_no_batch_left_room_says_what_to_change(dev_config, cache):
    config = {**dev_config, **AUTO}
    swept(config, None, cache)
    with pytest.raises(ConfigError, match="found no configuration that fits with the chip.s margin. Fix: set a"):
        compile_step.take_the_sweeps_batch(settings_of(config))


def test_a_sweep_made_elsewhere_is_kept_only_for_this_stacks_train_inputs(dev_config, cache, tmp_path):
    config = {**dev_config, **AUTO}
    answer = swept(config, 4, cache)
    compile_step.sweep_path(settings_of(config).pipeline).unlink()
    given = tmp_path / "sweep.json"
    chosen = answer["chosen"]
    for bad, problem in [
        ({**answer, "sweep_fingerprint": "0" * 64}, "is a sweep of other train inputs"),
        ({**answer, "chosen": {**chosen, "per_device_batch_size": "4; rm -rf /"}}, "names '4; rm -rf /' as a batch"),
        ({**answer, "chosen": {**chosen, "per_device_batch_size": True}}, "names True as a batch"),
        ({**answer, "chosen": {**chosen, "levers": {"xlaFlags": "--a=1; rm -rf /"}}}, "chooses settings this stack"),
        ({**answer, "chosen": {**chosen, "levers": {"trainer": "tunix", "vocabTiling": 4}}}, "NNX loop is untested"),
        ([answer], "is not a sweep's answer"),
        ({**answer, "chosen": [4]}, "is not a sweep's answer"),
    ]:
        given.write_text(json.dumps(bad))
        with pytest.raises(ConfigError, match=problem):
            compile_step.take_sweep(given, settings_of(config).pipeline)
        assert not compile_step.sweep_path(settings_of(config).pipeline).exists()
    given.write_text(json.dumps(answer))
    compile_step.take_sweep(given, settings_of(config).pipeline)
    assert compile_step.take_the_sweeps_batch(settings_of(config)).pipeline.per_device_batch_size == 4


def test_the_plan_says_train_waits_on_the_sweep_then_compares_the_batch_it_found(dev_config, cache, tmp_path):
    """From batch 4 (not the seed's 1, where a sweep starts): until a sweep is on file, no batch is compared."""
    base, head = tmp_path / "base.yaml", tmp_path / "head.yaml"
    base.write_text(json.dumps({"config": {**dev_config, "tpu-sft:perDeviceBatchSize": "4"}}))
    head.write_text(json.dumps({"config": {**dev_config, **AUTO}}))
    waiting = {task: (reruns, why) for task, reruns, why in plan(load(base, "dev"), load(head, "dev"))}
    assert waiting["convert"][0] is False
    unknown = "`tpu-sft:perDeviceBatchSize` is auto and no sweep of these train inputs is on file (scripts/preflight)"
    assert waiting["train"] == (True, unknown)
    assert waiting["export"][0] is True
    swept({**dev_config, **AUTO}, 4, cache)  # the sweep found the base's own batch: nothing re-runs
    assert {task: reruns for task, reruns, _ in plan(load(base, "dev"), load(head, "dev"))}["train"] is False
    swept({**dev_config, **AUTO}, 8, cache)
    found = {task: (reruns, why) for task, reruns, why in plan(load(base, "dev"), load(head, "dev"))}
    assert found["train"] == (True, "`perDeviceBatchSize`: 4 → 8")
    assert plan_main(["--base", str(base), "--head", str(head)]) == 0


COMPILER_STANDIN = """#!{python}
# Stands in for `python -m workload.preflight` (no MaxText): HBM per chip = 6 GiB + 1.8 GiB a sequence, 1.2 GiB with
# the loss's vocabulary in tiles; 1,000 tokens/s per chip a sequence, 10 % less with remat minimal (a stand-in).
import json, sys
settings = json.load(open(sys.argv[sys.argv.index("--settings") + 1]))
batch, tiled = int(settings["perDeviceBatchSize"]), settings["vocabTiling"] is not None
kept = settings["rematPolicy"] is not None
open({calls!r}, "a").write(f"{{batch}}{{'t' if tiled else ''}}{{'k' if kept else ''}}\\n")
used, limit = int((6 + (1.2 if tiled else 1.8) * batch) * 2**30), 32 * 2**30
record = {{"fits": used <= limit, "accelerator": "v6e-8", "hbm_bytes_per_chip": used,
          "hbm_limit_bytes_per_chip": limit, "compile_seconds": 1.0, "settings": {{"per_device_batch_size": batch}},
          "step_time": {{"tokens_per_s_per_chip": 1000.0 * batch * (0.9 if kept else 1), "mfu": 0.5, "step_s": 1.0,
                         "bound": "compute"}}}}
if record["fits"]:
    record["bounds"] = {{"step_seconds_at_least": 0.01, "tokens_per_second_at_most": 1.0, "run_hours_at_least": 0.1,
                        "usd_at_least": 1.0}}
print(json.dumps(record))
sys.exit(0 if record["fits"] else 1)
"""


def test_preflight_of_an_auto_stack_sweeps_first_then_answers_for_the_batch_it_found(
    cache, tmp_path, monkeypatch, capsys
):
    calls, standin = tmp_path / "compiled", tmp_path / "python"
    standin.write_text(COMPILER_STANDIN.format(python=sys.executable, calls=str(calls)))
    standin.chmod(0o755)
    monkeypatch.setenv("PREFLIGHT_PYTHON", str(standin))
    argv = [str(compile_step.REPO / "Pulumi.dev.yaml"), "tpu-sft:perDeviceBatchSize=auto"]
    assert compile_step.main(argv) == 0
    # each candidate's batch search (infra/preflight/candidates.py), from the default batch, 4: the stack's own levers'
    # 8 is 20.4 GiB, 16 does not fit; in tiles, 16 is 25.2 GiB and 32 does not fit
    own, tiled = ["4", "8", "16"], ["4t", "8t", "16t", "32t"]
    kept = [f"{batch}k" for batch in own]  # remat minimal: as much memory here, 10 % slower
    assert calls.read_text().split() == own + kept + tiled
    out = capsys.readouterr().out.splitlines()  # the sweep's table, choice and answer, then the chosen's record
    assert out[-4] == (
        "Chosen: trainer native, vocabTiling 4, perDeviceBatchSize 16: 16,000 tokens/s per chip, 50.0% MFU predicted "
        "(1000 ms a step, compute-bound)"
    )
    assert out[-3] == (
        "Runner-up: trainer native, perDeviceBatchSize 8: 8,000 tokens/s per chip, 50.0% MFU predicted "
        "(1000 ms a step, compute-bound)"
    )
    assert json.loads(out[-2])["runner_up"]["tokens_per_s_per_chip"] == 8_000
    last = json.loads(out[-1])
    assert last["settings"]["per_device_batch_size"] == 16 and last["fits"] and last["levers"]["vocabTiling"] == 4
    assert compile_step.main(argv) == 0 and len(calls.read_text().split()) == 10  # all remembered: nothing compiled
