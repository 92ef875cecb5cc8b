"""Preflight: whether a training configuration fits a TPU's HBM, known before any VM exists, from the compiler.

The fast tests read the figures (workload/preflight/fit.py) and the arguments compiled; the MaxText tests compile a
small gemma3's SFT step for a v6e-8 in .maxtext-venv, one that fits and one that cannot.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import types
from dataclasses import asdict, dataclass
from pathlib import Path

import pytest

from infra.config.read_settings import parse
from infra.config.stack_file import read_stack_config
from infra.preflight.compile_step import train_fingerprint
from workload.core.config import PipelineConfig
from workload.launch.jax_process import JaxProcess
from workload.preflight import fit
from workload.preflight.__main__ import maxtext_arguments
from workload.preflight.step_time import CompiledCost
from workload.run import commands
from workload.run.layout import Layout
from workload.tiny import assets as tiny

GIB = 2**30
OOM = (
    "RESOURCE_EXHAUSTED: E1000: CompileTimeHbmOom: XLA:TPU compile permanent error. Ran out of memory in memory "
    "space hbm. Used 44.53G of 31.25G hbm. Exceeded hbm capacity by 13.29G."
)
# gemma3-4b cut to the tiny model's sizes (workload/tiny/assets.py) with a small vocabulary: gemma3's layers, compiled
# for a v6e-8 in ~7 s here. Two full-width layers would take ~160 s: the compile time is in the widths, not the layers.
SMALL_GEMMA3 = [
    f"--maxtext={override}"
    for override in [*(o for o in tiny.maxtext_overrides() if not o.startswith("vocab_size=")), "vocab_size=1024"]
]
# The same with one layer, for the step that cannot fit: the compiler took ~100 s of CPU to refuse it with six
# layers and ~55 s with one, and what that test checks (the refusal read back, the fix, the cache) is no layer's.
ONE_LAYER_GEMMA3 = [
    "--maxtext=base_num_decoder_layers=1" if o.startswith("--maxtext=base_num_decoder_layers=") else o
    for o in SMALL_GEMMA3
]
SMALL_SETTINGS = {"maxTargetLength": 128, "perDeviceBatchSize": 1}  # batch 1: the default is the measured 4
REPO = Path(__file__).resolve().parents[3]


def test_the_step_compiled_takes_train_sfts_own_arguments_plus_the_topology(tmp_path):
    config = PipelineConfig(per_device_batch_size=4, max_target_length=1024, accelerator_type="v6e-16")
    layout = Layout(str(tmp_path), str(tmp_path), config.model, commands.run_name(config))
    train = commands.train_sft(
        config, layout, commands.OnHost(worker=JaxProcess(0, ("h0", "h1", "h2", "h3")))
    )  # v6e-16: 4 hosts
    compiled = maxtext_arguments(config, str(tmp_path), ["base_num_decoder_layers=2"])
    assert compiled == [
        *train.argv[4:],  # after python -m LAUNCHER TRAIN_SFT
        "compile_topology=v6e-16",
        "compile_topology_num_slices=1",
        "base_num_decoder_layers=2",
    ]
    assert "per_device_batch_size=4" in compiled and "max_target_length=1024" in compiled


@pytest.mark.parametrize(
    ("trainer", "compiler"), [("native", "workload.preflight.native_step"), ("tunix", "workload.preflight.aot_step")]
)
def test_each_loop_is_compiled_by_its_own_step_compiler_with_the_levers_argv_and_xla_flags(
    monkeypatch, tmp_path, trainer, compiler
):
    """A stand-in compile that records what it was given: the loop's compiler, the train step's argv with the levers,
    and libtpu's flags in the environment before libtpu loads."""
    from workload.preflight import __main__ as preflight

    given = {}

    class Refused(Exception):
        def __init__(self) -> None:
            self.used, self.limit, self.seconds = 2 * GIB, GIB, 1.0
            sizes = {"per_device_batch_size": 2, "max_target_length": 2048}
            self.config = types.SimpleNamespace(**{**dict.fromkeys(preflight.COMPILED_SETTINGS, "x"), **sizes})

    def compile_step(argv):
        given["argv"], given["flags"] = argv, os.environ.get("LIBTPU_INIT_ARGS")
        raise Refused()

    monkeypatch.setitem(sys.modules, compiler, types.SimpleNamespace(compile_step=compile_step, HbmOom=Refused))
    monkeypatch.setattr(preflight, "module_file", lambda module: f"/{module}.py")
    monkeypatch.setenv("LIBTPU_INIT_ARGS", "")  # restored after the test, which sets it
    flags = "--xla_tpu_enable_async_collective_fusion=true"
    config = PipelineConfig(
        trainer=trainer, per_device_batch_size=2, remat_policy="minimal", attention="flash", xla_flags=flags
    )
    line, record = preflight.preflight(config, None, [])
    assert given["flags"] == flags
    module = next(a for a in preflight.train_command(config, str(tmp_path)).argv if a.startswith("maxtext."))
    assert given["argv"][0] == f"/{module}.py"  # pyconfig picks the loop's config from it
    assert {"remat_policy=minimal", "attention=flash", "compile_topology=v6e-8"} <= set(given["argv"])
    assert record["trainer"] == trainer and record["fits"] is False
    assert line.endswith("Fix: pulumi config set tpu-sft:perDeviceBatchSize 1")


def test_the_compilers_oom_reads_back_as_bytes_per_chip():
    assert fit.parse_hbm_oom(OOM) == (round(44.53 * GIB), round(31.25 * GIB))
    one_buffer = (
        "RESOURCE_EXHAUSTED: Allocation (size=51539607552) would exceed memory (size=33822867456) :: #allocation10"
    )
    assert fit.parse_hbm_oom(one_buffer) == (51539607552, 33822867456)
    assert fit.parse_hbm_oom("INTERNAL: RET_CHECK failure") is None


def test_memory_is_the_compilers_peak_or_counts_an_output_that_reuses_a_donated_argument_once():
    memory = fit.Memory(arguments=10, outputs=7, aliased=5, temporaries=3, generated_code=1)
    assert memory.total == 10 + 2 + 3 + 1
    assert fit.Memory(arguments=10, outputs=7, aliased=5, temporaries=3, generated_code=1, peak=12).total == 12


@pytest.mark.parametrize(
    ("batch", "sequence", "accelerator", "fix"),
    [
        (16, 2048, "v6e-8", "pulumi config set tpu-sft:perDeviceBatchSize 8"),
        (1, 2048, "v6e-8", "pulumi config set tpu-sft:maxTargetLength 1024"),
        (1, 512, "v6e-8", "pulumi config set tpu-sft:acceleratorType v6e-16"),
        (1, 512, "v6e-256", "use a smaller model"),
    ],
)
def test_a_step_that_does_not_fit_names_one_setting_to_change(batch, sequence, accelerator, fix):
    line = fit.does_not_fit_line(accelerator, round(44.53 * GIB), round(31.25 * GIB), batch, sequence)
    assert "\n" not in line
    assert f"44.53 GiB per chip of 31.25 GiB HBM on {accelerator}" in line
    assert line.endswith(f"Fix: {fix}")


def test_a_step_the_compiler_accepts_beyond_the_chips_hbm_does_not_fit(monkeypatch):
    """A stand-in for the compile (no libtpu in the fast tier), with the figures libtpu gave for gemma3-4b on a
    v6e-16 at batch 8 (Tunix 0.1.3's step, which returned the logits): it compiled, and its memory analysis said
    a peak of 37.34 GiB a chip of 31.25; the two steps in flight would hold 2 × 16 GiB of logits beside it."""
    from workload.preflight import __main__ as preflight

    sizes = {"per_device_batch_size": 8, "global_batch_size_to_train_on": 128, "max_target_length": 2048}
    config = types.SimpleNamespace(**{**dict.fromkeys(preflight.COMPILED_SETTINGS, "x"), **sizes})
    memory = fit.Memory(
        arguments=3_889_190_400,
        outputs=21_068_737_696,
        aliased=2_916_645_376,
        temporaries=19_091_660_416,
        generated_code=97_100_800,
        peak=40_091_646_624,
    )
    live = fit.Live(train=memory, eval=None, batch=6 * 8 * 2048 * 4, eval_batch=6 * 8 * 2048 * 4, in_flight=2)
    cost = CompiledCost(flops=1e14, hbm_bytes=1e11, collective_bytes={"all-gather": 1e9})
    step = types.SimpleNamespace(
        live=live, flops=1e14, maxtext_flops=1e14, seconds=270.3, hbm_limit=round(31.25 * GIB), config=config, cost=cost
    )
    compiler = types.SimpleNamespace(compile_step=lambda argv: step, HbmOom=type("HbmOom", (Exception,), {}))
    monkeypatch.setitem(sys.modules, "workload.preflight.aot_step", compiler)
    monkeypatch.setattr(preflight, "module_file", lambda module: "train_sft.py")
    config = PipelineConfig(accelerator_type="v6e-16", per_device_batch_size=8, trainer="tunix")
    line, record = preflight.preflight(config, None, [])
    assert record["trainer"] == "tunix"
    # its cost and its time on paper are recorded, what a sweep ranks by (workload/preflight/step_time.py)
    assert record["cost"]["flops"] == 1e14 and record["step_time"]["step_s"] > 0
    assert record["fits"] is False and record["hbm_bytes_per_chip"] == live.needed > live.total > 40_091_646_624
    assert live.total - memory.peak > 2 * 16 * GIB
    assert live.needed == round(live.total * 1.15)  # 69.34 GiB: the chip's margin binds, not a resume
    assert line.startswith("tpu-sft:perDeviceBatchSize: does not fit: at least 79.74 GiB per chip of 31.25 GiB HBM")
    assert line.endswith("Fix: pulumi config set tpu-sft:perDeviceBatchSize 4")


# gemma3-4b on a v6e-8 at batch 1 (libtpu, 2026-12-04, commit 488ebbe): the train step's memory analysis.
TRAIN_STEP = fit.Memory(
    arguments=7_768_634_880,
    outputs=7_768_600_224,
    aliased=5_826_443_776,
    temporaries=8_471_835_872,
    generated_code=378_456_576,
    peak=16_431_769_760,
)
BATCH = 6 * 2048 * 4  # six int32 arrays of one 2,048-token sequence a chip


def test_the_verdict_counts_the_steps_in_flight_beside_the_train_steps_peak():
    live = fit.Live(train=TRAIN_STEP, eval=None, batch=BATCH, eval_batch=BATCH, in_flight=2)
    returned = TRAIN_STEP.outputs - (TRAIN_STEP.arguments - BATCH)  # loss, aux, gradient norm: no updated state
    assert 0 < returned < 2**20
    assert live.beside == 2 * (BATCH + returned)
    assert live.total == TRAIN_STEP.peak + live.beside and live.binding == "train"
    assert live.optimizer_state == 0 and live.parts()["eval_step_peak"] is None


def test_the_logits_a_step_returned_would_be_counted_once_per_step_in_flight():
    logits = 2048 * 262_144 * 4
    returning = fit.Memory(**{**asdict(TRAIN_STEP), "outputs": TRAIN_STEP.outputs + logits})
    live = fit.Live(train=returning, eval=None, batch=BATCH, eval_batch=BATCH, in_flight=2)
    kept = fit.Live(train=TRAIN_STEP, eval=None, batch=BATCH, eval_batch=BATCH, in_flight=2)
    assert live.total - kept.total == 2 * logits


def test_the_eval_step_counts_the_optimizer_state_it_leaves_in_hbm_and_the_larger_peak_binds():
    weights = 1_942_158_720  # the eval step's arguments but its batch: the weights alone
    evaluating = fit.Memory(
        arguments=weights + BATCH, outputs=64, aliased=0, temporaries=9_000_000_000, generated_code=1, peak=0
    )
    live = fit.Live(train=TRAIN_STEP, eval=evaluating, batch=BATCH, eval_batch=BATCH, in_flight=2)
    assert live.optimizer_state == TRAIN_STEP.arguments - BATCH - weights  # Adam's moments and the accumulator
    # each program counted with the other's code: both stay loaded on the chip
    assert live.eval_peak == evaluating.parts + live.optimizer_state + TRAIN_STEP.generated_code
    assert live.train_peak == TRAIN_STEP.peak + evaluating.generated_code
    assert live.eval_peak > live.train_peak and live.binding == "eval"
    assert live.total == live.eval_peak + live.beside
    smaller = fit.Memory(**{**asdict(evaluating), "temporaries": 10**9})
    assert fit.Live(train=TRAIN_STEP, eval=smaller, batch=BATCH, eval_batch=BATCH, in_flight=2).binding == "train"


def test_a_resumed_attempt_counts_its_restored_state_beside_the_train_steps_peak():
    """gemma3-4b's step on a v6e-8 at batch 1: 7.24 GiB of weights and optimizer state, which a resumed attempt holds
    again beside the step (measured once, on the lent v5e: workload/preflight/fit.py `Live.resumed`)."""
    live = fit.Live(train=TRAIN_STEP, eval=None, batch=BATCH, eval_batch=BATCH, in_flight=2)
    assert live.state == TRAIN_STEP.arguments - BATCH
    assert live.resumed == live.train_peak + live.state + live.beside > round(live.total * 1.15)
    assert live.needed == live.resumed
    assert fit.fits_line("v6e-8", live, round(31.25 * GIB)) == (
        "fits: 22.54 GiB per chip of 31.25 GiB HBM on v6e-8, 8.71 GiB headroom "
        "(a resumed attempt: the train step's peak, its restored state and 0.00 GiB in flight)"
    )


def test_maxtexts_own_loop_resumes_into_its_state_and_runs_one_step_ahead():
    """MaxText restores the checkpoint in place of the state it would initialise (maxtext_utils.setup_initial_state):
    a resumed attempt holds no second copy, and the chip's margin binds."""
    native = {"resume_keeps_a_copy": False, "margin": 1.05}  # the loop's own margin: workload/core/accelerators.py
    live = fit.Live(train=TRAIN_STEP, eval=None, batch=BATCH, eval_batch=BATCH, in_flight=1, **native)
    assert live.resumed == live.train_peak + live.beside < live.needed == round(live.total * 1.05)
    assert live.counted() == "the train step's peak + 0.00 GiB for 1 step in flight"
    assert fit.fits_line("v6e-8", live, round(31.25 * GIB)).endswith(", × 1.05 the chip's margin)")


def test_the_line_that_fits_says_what_it_counted():
    # a step whose state is small beside its peak: the chip's margin binds
    small = fit.Memory(
        arguments=BATCH + GIB // 2, outputs=GIB // 2, aliased=GIB // 2, temporaries=0, generated_code=0, peak=14 * GIB
    )
    live = fit.Live(train=small, eval=None, batch=BATCH, eval_batch=BATCH, in_flight=2)
    assert live.needed == round(live.total * 1.15) > live.resumed
    assert fit.fits_line("v6e-8", live, round(31.25 * GIB)) == (
        "fits: 16.10 GiB per chip of 31.25 GiB HBM on v6e-8, 15.15 GiB headroom "
        "(the train step's peak + 0.00 GiB for 2 steps in flight, × 1.15 the chip's margin)"
    )
    small_eval = fit.Memory(arguments=BATCH, outputs=0, aliased=0, temporaries=0, generated_code=GIB // 8)
    evaluating = fit.Live(train=small, eval=small_eval, batch=BATCH, eval_batch=BATCH, in_flight=2)
    assert fit.fits_line("v6e-8", evaluating, round(31.25 * GIB)).endswith(
        "(the train step's peak and the eval step's code + 0.00 GiB for 2 steps in flight, × 1.15 the chip's margin)"
    )
    large_eval = fit.Memory(arguments=BATCH, outputs=0, aliased=0, temporaries=16 * GIB, generated_code=0)
    binding = fit.Live(train=small, eval=large_eval, batch=BATCH, eval_batch=BATCH, in_flight=2)
    assert binding.binding == "eval" and fit.fits_line("v6e-8", binding, round(31.25 * GIB)).endswith(
        "(the eval step's peak, the optimizer's state and the train step's code + 0.00 GiB for 2 steps in flight, "
        "× 1.15 the chip's margin)"
    )


def test_bounds_are_flops_at_the_chips_peak():
    # gemma3-4b on a v6e-8 at batch 1, 2048 tokens: 8 x 2048 tokens a step, 1000 steps, $2.70 a chip-hour.
    bounds = fit.bounds(1.836e13, 918.0, 8 * 2048, 1000, 8, 2.70)
    assert bounds.step_seconds_at_least == pytest.approx(0.02)
    assert bounds.tokens_per_second_at_most == pytest.approx(16384 / 0.02)
    assert bounds.run_hours_at_least == pytest.approx(20 / 3600)
    assert bounds.usd_at_least == pytest.approx(20 / 3600 * 8 * 2.70)
    assert fit.bounds(1.836e13, 918.0, 8 * 2048, 1000, 8, None).usd_at_least is None


def _ended(process: subprocess.Popen) -> subprocess.CompletedProcess:
    stdout, stderr = process.communicate(timeout=900)
    return subprocess.CompletedProcess(process.args, process.returncode, stdout, stderr)


@dataclass
class TwoPreflights:
    fits: dict[str, subprocess.CompletedProcess]  # workload.preflight on the small gemma3, by trainer
    cannot_fit: list[subprocess.CompletedProcess]  # infra.preflight on the dev stack, twice
    started: Path  # one line per start of the MaxText Python
    directory: Path  # where infra.preflight ran: its cache is there


@pytest.fixture(scope="module")
def two_preflights(maxtext_python, tmp_path_factory) -> TwoPreflights:
    """A preflight that fits, for each loop, and one that cannot, compiled at the same time (libtpu lets one process
    per machine hold its lockfile unless told that none drives a TPU); then the one that cannot, again, from its cache.

    The one that cannot goes through the stack's side (scripts/preflight → infra/preflight/compile_step.py), as a user
    runs it: the dev stack with the small gemma3 of one layer, a batch whose logits alone are 32 GiB a chip (65,536
    sequences x 128 tokens x 1,024 words x 4 bytes), in the dev stack's loop, MaxText's own: its compiler accepts the
    step, at 78.66 GiB a chip, and the verdict refuses it. (A sweep compiles such batches for minutes each: its search
    is tested on a stand-in, tests/infra/preflight/test_batch_sweep.py, and the real one is in bench/RESULTS.md.)"""
    directory = tmp_path_factory.mktemp("preflight")
    started = directory / "started"
    python = directory / "python"
    python.write_text(f'#!/bin/sh\necho "$@" >> {started}\nexec {maxtext_python} "$@"\n')
    python.chmod(0o755)
    argv = [sys.executable, "-m", "infra.preflight", str(REPO / "Pulumi.dev.yaml"), "tpu-sft:maxTargetLength=128"]
    argv += ONE_LAYER_GEMMA3
    argv.append("tpu-sft:perDeviceBatchSize=65536")  # intermixed with the options, as a user may type it
    env = {**os.environ, "PREFLIGHT_PYTHON": str(python), "PYTHONPATH": str(REPO)}

    def cannot_fit() -> subprocess.Popen:
        return subprocess.Popen(argv, cwd=directory, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def fits(trainer: str) -> subprocess.Popen:
        settings = directory / f"{trainer}.json"
        settings.write_text(json.dumps({**SMALL_SETTINGS, "trainer": trainer}))
        argv = [maxtext_python, "-m", "workload.preflight", "--settings", str(settings), "--usd-per-chip-hour", "2.7"]
        return subprocess.Popen(argv + SMALL_GEMMA3, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    beside = cannot_fit()
    running = {trainer: fits(trainer) for trainer in ("native", "tunix")}
    done = {trainer: _ended(process) for trainer, process in running.items()}
    first = _ended(beside)
    return TwoPreflights(done, [first, _ended(cannot_fit())], started, directory)


def _fitting_record(done: subprocess.CompletedProcess) -> dict:
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()
    record = json.loads(lines[-1])
    assert lines[-2].startswith("fits: ") and "per chip of" in lines[-2]
    assert record["fits"] and record["accelerator"] == "v6e-8"
    assert 0 < record["hbm_bytes_per_chip"] < record["hbm_limit_bytes_per_chip"]
    assert record["flops_per_step_per_chip"] > 0 and record["bounds"]["usd_at_least"] > 0
    assert record["settings"]["max_target_length"] == 128 and record["settings"]["per_device_batch_size"] == 1
    # The run evaluates (evalInterval's default): its step is compiled too, and the verdict counts what the loop
    # holds beside the steps.
    live = record["live_per_chip"]
    assert record["eval_memory_per_chip"]["peak"] == live["eval_step_peak"] > 0
    larger = max(live["train_with_eval_code"], live["eval_with_optimizer_and_train_code"])
    assert live["total"] == larger + live["beside_the_step"]
    assert live["chip_margin"] == {"tunix": 1.15, "native": 1.05}[record["trainer"]]  # each loop's, on the chip
    assert live["batch"] == 6 * 128 * 4  # six int32 arrays, one sequence a chip
    needed = max(round(live["total"] * live["chip_margin"]), live["resumed"])
    assert record["hbm_bytes_per_chip"] == live["needed"] == needed
    logits = 128 * 1024 * 4  # one sequence's, float32: the step returns none
    assert 0 < live["returned_per_step"] < logits
    # ~7 s here on an idle machine; the full-size step takes 7 minutes or more. No wall-clock bound: the suite
    # shares the CPUs.
    assert record["compile_seconds"] < 300
    # the step's cost and its time on paper (workload/preflight/step_time.py): what a sweep ranks configurations by
    assert record["cost"]["flops"] == record["compiled_flops_per_step_per_chip"] > 0
    step_time = record["step_time"]
    tokens_per_chip = record["tokens_per_step"] / 8
    assert step_time["tokens_per_s_per_chip"] == pytest.approx(tokens_per_chip / step_time["step_s"])
    assert 0 < step_time["mfu"] < 1
    return record


def test_a_small_gemma3_fits_a_v6e_8_in_tunixs_loop_even_beside_another_preflight(two_preflights):
    record = _fitting_record(two_preflights.fits["tunix"])
    live, train = record["live_per_chip"], record["memory_per_chip"]
    assert record["trainer"] == "tunix" and live["in_flight_steps"] == 2  # max_inflight_computations
    # The train step is given the model's buffers and the optimizer's (workload/launch/model_donation.py): its whole
    # state is donated, the weights the eval step reads and the optimizer's state it leaves in HBM.
    assert train["aliased"] >= train["arguments"] - live["batch"] > live["optimizer_state_beside_eval"] > 0
    # a resumed attempt holds its restored state again beside the step, as it did on the chip
    state = train["arguments"] - live["batch"]
    assert live["resumed"] == live["train_with_eval_code"] + state + live["beside_the_step"]


def test_a_small_gemma3_fits_a_v6e_8_in_maxtexts_own_loop_compiled_by_train_compile(two_preflights):
    record = _fitting_record(two_preflights.fits["native"])
    live, train = record["live_per_chip"], record["memory_per_chip"]
    assert record["trainer"] == "native" and live["in_flight_steps"] == 1  # its metric logger reads the step before
    # The whole state is the train step's donated argument, and the eval step reads its weights only: Adam's two
    # moments, float32 like the weights, stay beside it, two thirds of the state.
    state = train["arguments"] - live["batch"]
    assert train["aliased"] >= state > 0
    assert live["optimizer_state_beside_eval"] == pytest.approx(state * 2 / 3, rel=0.01)
    # MaxText restores the state in place of the one it would initialise: no copy beside the step
    assert live["resumed"] == live["train_with_eval_code"] + live["beside_the_step"]


def test_a_stack_whose_batch_cannot_fit_fails_in_one_line_and_is_not_compiled_twice(two_preflights):
    """Run again, its answer comes from the cache: the MaxText Python is not started a second time."""
    runs = two_preflights.cannot_fit
    for done in runs:
        assert done.returncode == 1, done.stderr[-3000:]
        record = json.loads(done.stdout.strip().splitlines()[-1])
        assert record["fits"] is False and record["hbm_bytes_per_chip"] > record["hbm_limit_bytes_per_chip"]
        assert record["settings"]["per_device_batch_size"] == 65536
        # what `pulumi up` refuses the stack with (infra/preflight/compile_step.py `refuse_a_known_misfit`)
        fix = "pulumi config set tpu-sft:perDeviceBatchSize 32768"
        assert record["fix"] == {"key": "tpu-sft:perDeviceBatchSize", "fix": fix}
    [line] = [line for line in runs[0].stderr.splitlines() if line.startswith("tpu-sft:")]
    assert line.startswith("tpu-sft:perDeviceBatchSize: does not fit: ")
    assert line.endswith("Fix: pulumi config set tpu-sft:perDeviceBatchSize 32768")
    assert runs[1].stderr.startswith("preflight: these train inputs were compiled before (.tpu-sft/preflight): ")
    assert runs[1].stderr.count("\n") == 1
    assert len(two_preflights.started.read_text().splitlines()) == 1

    stack = read_stack_config(REPO / "Pulumi.dev.yaml")
    pipeline = parse(
        {**stack, "tpu-sft:perDeviceBatchSize": "65536", "tpu-sft:maxTargetLength": "128"}, stack="dev"
    ).pipeline
    assert [p.name for p in (two_preflights.directory / ".tpu-sft" / "preflight").iterdir()] == [
        f"{train_fingerprint(pipeline, tuple(o.removeprefix('--maxtext=') for o in ONE_LAYER_GEMMA3))}.json"
    ]
