"""The TPU bench's reading of a trainer's log, on the logs the lent TPU v5e chip printed (bench/tpu/runs/), and its
cases' MaxText arguments. No TPU: the bench itself runs on one (bench/tpu/README.md)."""

import json
from pathlib import Path

import pytest

from bench.tpu import cases, prepare, reread, run, table
from bench.tpu.run import summarize
from workload.core.config import ConfigError
from workload.run import commands

RUNS = Path(__file__).resolve().parents[2] / "bench" / "tpu" / "runs"


def chip(run: str, name: str, **levers) -> tuple[cases.Case, Path]:
    return cases.Case(name=name, steps=10, **levers), RUNS / run / "logs" / f"{name}.log"


def test_a_trained_case_reads_as_its_steady_steps_against_the_chips_own_peak():
    case, log = chip("2026-12-05-1", "tunix-b1")
    read = summarize(case, log, 0, case.steps)
    assert read["outcome"] == "trained" and read["steps_logged"] == [1, 10]
    assert (read["device_kind"], read["hbm_peak_bytes_per_chip"]) == ("TPU v5 lite", 12636644352)
    # steps 4-10: the first compiles, the second is still slow (0.708 s)
    assert read["median_step_ms"] == 149.0 and read["tokens_per_s_per_chip"] == 13721
    assert read["mfu"] == pytest.approx(read["tflops_per_chip"] / 197.0, abs=1e-3)


def test_an_out_of_memory_error_is_a_result_with_the_bytes_asked_for():
    case, log = chip("2026-12-05-1", "tunix-b1-unpatched", placement="unpatched")
    read = summarize(case, log, 1, case.steps)
    assert read["outcome"] == "out of memory" and read["steps_logged"] is None
    assert "RESOURCE_EXHAUSTED" in read["oom"] and read["oom_asked_bytes"] == 50 * 2**20
    case, log = chip("2026-12-05-3", "tunix-b4", batch=4)
    compiled = summarize(case, log, 1, case.steps)
    assert compiled["outcome"] == "out of memory" and "HLO temporaries (16.45G)" in compiled["oom"]


def test_the_flash_kernels_blocks_outgrowing_vector_memory_are_told_from_hbm():
    case, log = chip("2026-12-05-5", "native-b3-sa2048-fused", loop="native", batch=3)
    read = summarize(case, log, 1, case.steps)
    assert read["outcome"] == "out of memory: VMEM, at compile" and "CompileTimeScopedVmemOom" in read["oom"]


def test_a_case_the_bench_killed_stays_killed_when_its_log_is_read_again():
    read = reread.reread(RUNS / "2026-12-05-5", _record("2026-12-05-5", "native-b3-vmem"))
    assert read["outcome"] == "killed after 170 s"


def test_maxtexts_own_loop_counts_from_step_0_and_prints_its_compiled_memory():
    case, log = chip("2026-12-05-1", "native-b1", loop="native")
    read = summarize(case, log, 0, case.steps)
    assert read["outcome"] == "trained" and read["steps_logged"] == [0, 9]
    assert read["maxtext_compiled_gb"] == {"total": 9.2, "temp": 3.3, "arguments": 5.9}
    assert read["median_step_ms"] == 106.0


def test_the_resumed_run_goes_on_from_the_saved_step():
    run = json.loads((RUNS / "2026-12-05-3" / "results.json").read_text())
    again = reread.reread(RUNS / "2026-12-05-3", _record("2026-12-05-3", "tunix-resume"))
    assert again["outcome"] == "resumed"
    assert (again["save"]["steps_logged"], again["resume"]["steps_logged"]) == ([1, 5], [6, 10])
    assert set(again["optimizer_counters_at_end"].values()) == {0, 10}  # MultiSteps' mini step is 0 between updates
    assert "tunix-resume (resume)" in table.markdown({"environment": run["environment"], "cases": [again]})


def test_a_case_is_the_pipelines_train_argv_with_the_benchs_levers():
    case = cases.Case(name="x", batch=3, remat="full", attention="dot_product", vocab_tiling=4, maxtext=("a=b",))
    argv = cases.maxtext_arguments(case, "/w", "/d/c.parquet", "/tok")
    config_argv = commands.train_sft(
        cases.PipelineConfig(dataset="/d/c.parquet"), cases.Layout("/w", "/w", "gemma3-4b", "x")
    )
    assert not any(a.startswith(("load_parameters_path=", "profiler=")) for a in argv)
    assert "per_device_batch_size=3" in argv and "hf_train_files=/d/c.parquet" in argv and "tokenizer_path=/tok" in argv
    assert argv[-5:] == [
        "enable_checkpointing=False",
        "remat_policy=full",
        "attention=dot_product",
        "num_vocab_tiling=4",
        "a=b",
    ]
    assert commands.trainer_arguments(config_argv.argv)[0] == argv[0] == "run_name=x"


@pytest.mark.parametrize(
    ("levers", "said"),
    [
        ({"loop": "pytorch"}, "case x: loop: is 'pytorch'"),
        ({"loop": "native", "placement": "unpatched"}, "case x: placement: is Tunix's"),
        ({"batch": 0}, "case x: needs layers, batch, seq and steps of at least 1"),
        ({"release": "0.2.5"}, "case x: release: is '0.2.5'"),
        ({"lora_rank": 16}, "case x: LoRA: needs the Tunix loop of release 0.2.3 by name"),
        ({"loop": "native", "release": "0.2.3", "lora_rank": 16}, "case x: LoRA: needs the Tunix loop"),
        ({"release": "0.2.3", "lora_weight_qtype": "int8"}, "case x: lora_weight_qtype: is QLoRA without a rank"),
    ],
)
def test_a_bad_case_is_one_line(levers, said):
    with pytest.raises(ConfigError) as error:
        cases.Case(name="x", **levers)
    assert str(error.value).startswith(said) and "\n" not in str(error.value)


def test_another_release_runs_its_own_loop_from_its_own_source(monkeypatch, tmp_path):
    older = cases.Case(name="o", loop="native", release="0.2.2")
    lora = cases.Case(name="l", release="0.2.3", lora_rank=16, lora_weight_qtype="int8")
    assert cases.Case(name="p", loop="native").module == cases.RELEASE_LOOPS["0.2.3"]["native"]  # the pinned release
    assert older.module.endswith(".train_sft_deprecated") and run.launcher(older) == "bench.tpu.release_launcher"
    monkeypatch.setenv("PYTHONPATH", f"/site:{tmp_path / 'src'}:/repo")
    monkeypatch.setenv("TPU_BENCH_DIR", str(tmp_path))
    with pytest.raises(SystemExit, match="bench.tpu.prepare --maxtext 0.2.2"):
        run.environment_for(older)
    (tmp_path / "src-0.2.2" / "maxtext").mkdir(parents=True)
    assert run.environment_for(older)["PYTHONPATH"] == f"/site:{tmp_path / 'src-0.2.2'}:/repo"
    (tmp_path / "src" / "maxtext").mkdir(parents=True)
    env = run.environment_for(lora)  # 0.2.3 by name is the pinned release: its source is src/
    assert env["PYTHONPATH"] == f"/site:{tmp_path / 'src'}:/repo"
    argv = cases.maxtext_arguments(lora, "/w", "/d/c.parquet", "/tok")
    lora_keys = ["lora.enable_lora=true", "lora.lora_rank=16", "lora.lora_alpha=32.0", "lora.lora_weight_qtype=int8"]
    assert argv[-4:] == lora_keys  # the last the trainer's launcher takes out, to quantise


def test_the_pinned_release_unpacks_into_src_and_another_beside_it():
    assert prepare.source_dir(Path("/p"), None) == prepare.source_dir(Path("/p"), "0.2.3") == Path("/p/src")
    assert prepare.source_dir(Path("/p"), "0.2.2") == Path("/p/src-0.2.2")


def test_maxtext_023s_native_step_on_the_chip_reads_as_022s():
    """Issue 67: the same cases in one call, before and after; read again from the logs the chip printed."""
    for name in ("native-b1", "native-b3"):
        before = summarize(cases.Case(name=name, loop="native"), RUNS / "2026-12-06-5" / "logs" / f"{name}.log", 0, 10)
        after = summarize(
            cases.Case(name=name, loop="native", release="0.2.3"),
            RUNS / "2026-12-06-5" / "logs" / f"{name}-0.2.3.log",
            0,
            10,
        )
        assert before["outcome"] == after["outcome"] == "trained"
        assert abs(after["median_step_ms"] / before["median_step_ms"] - 1) < 0.03


def test_lora_at_34_layers_ran_out_of_memory_applying_the_adapters_on_the_chip():
    log = RUNS / "2026-12-06-8" / "logs" / "lora-34-b2-nnx-decoder.log"
    read = summarize(cases.Case(name="l", release="0.2.3", lora_rank=16), log, 1, 10)
    assert read["outcome"] == "out of memory" and read["oom_asked_bytes"] == 250 * 2**20
    assert "qwix/_src/model.py" in log.read_text()


def _record(run: str, name: str) -> dict:
    results = json.loads((RUNS / run / "results.json").read_text())
    return next(r for r in results["cases"] if r["case"]["name"] == name)


def test_lora_at_34_layers_trained_at_batch_4_and_5_with_one_compile():
    """Issue 67: the whole model with a rank-16 adapter, the model donated (2026-12-07); read again from the chip's
    logs, with the preflight's verdicts and FLOP counts for the same cases beside them."""
    predictions = json.loads((RUNS / "predictions-lora-v5e-1.json").read_text())
    read = {}
    for batch, run_dir in ((4, "2026-12-07-1"), (5, "2026-12-07-2")):
        name = f"lora-34-b{batch}-nnx-decoder-unscanned"
        case = cases.Case(name=name, layers=34, batch=batch, steps=6, release="0.2.3", lora_rank=16)
        read[batch] = run.with_prediction(
            {"case": {"name": name}, **summarize(case, RUNS / run_dir / "logs" / f"{name}.log", 0, 6)}, predictions
        )
        assert read[batch]["outcome"] == "trained" and read[batch]["steps_logged"] == [1, 6]
    # one compile: every step after the first is under 2 s, where a second compile took minutes
    assert (read[4]["median_step_ms"], read[5]["median_step_ms"]) == (1415.0, 1988.0)
    assert read[4]["mfu_on_lora_flops"] < read[4]["mfu_on_compiled_flops"] < read[4]["mfu"]
    # the preflight called batch 4 a fit and batch 5 not: never optimistic, here pessimistic by one batch
    assert predictions["cases"][read[4]["case"]["name"]]["fits"] is True
    assert predictions["cases"][read[5]["case"]["name"]]["fits"] is False
    assert "XLA's count" in table._mfu(read[4])


def test_qlora_at_34_layers_trained_in_int8_where_the_preflight_said_it_fits():
    """Issue 67: the whole model, its frozen weights in int8, a rank-16 adapter (2026-12-07); nf4 trained at 4 layers,
    its 34-layer compile outlasting the bench's limit; read again from the chip's logs, the preflight beside them."""
    predictions = json.loads((RUNS / "predictions-qlora-v5e-1.json").read_text())
    read = {}
    ran = (("int8", 34, "2026-12-07-3"), ("int8", 4, "2026-12-07-6"), ("nf4", 4, "2026-12-07-5"))
    for qtype, layers, run_dir in ran:
        name = f"qlora-{qtype}-{layers}-b2-nnx-decoder-unscanned"
        case = cases.Case(name=name, layers=layers, batch=2, release="0.2.3", lora_rank=16, lora_weight_qtype=qtype)
        log = RUNS / run_dir / "logs" / f"{name}.log"
        read[qtype, layers] = run.with_prediction({"case": {"name": name}, **summarize(case, log, 0, 10)}, predictions)
        assert read[qtype, layers]["outcome"] == "trained" and read[qtype, layers]["steps_logged"] == [1, 10]
        assert f"quantised to {qtype}" in log.read_text()
    assert read["int8", 34]["median_step_ms"] == 674.0 and read["int8", 34]["tokens_per_s_per_chip"] == 6078
    assert read["int8", 34]["mfu_on_lora_flops"] < read["int8", 34]["mfu_on_compiled_flops"] < read["int8", 34]["mfu"]
    assert read["int8", 34]["preflight"]["fits"] is True
    # nf4's dequantising lookup is slower than int8's scale, at 4 layers: the step and its compile
    assert read["nf4", 4]["median_step_ms"] / read["int8", 4]["median_step_ms"] == pytest.approx(1.38, abs=0.01)
    killed = reread.reread(RUNS / "2026-12-07-4", _record("2026-12-07-4", "qlora-nf4-34-b2-nnx-decoder-unscanned"))
    assert killed["outcome"] == "killed after 545 s"
