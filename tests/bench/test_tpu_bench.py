"""The TPU bench's reading of a trainer's log, on the logs the lent TPU v5e chip printed (bench/tpu/runs/), and its
cases' MaxText arguments. No TPU: the bench itself runs on one (bench/tpu/README.md)."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.tpu import cases, packages, prepare, reread, run, table
from bench.tpu.run import summarize
from workload.core import lock
from workload.core.config import ConfigError
from workload.run import commands

REPO = Path(__file__).resolve().parents[2]
RUNS = REPO / "bench" / "tpu" / "runs"


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
        ({"loop": "native", "lora_rank": 16}, "case x: LoRA: needs Tunix's loop of the pinned MaxText release"),
        ({"release": "0.2.2", "lora_rank": 16}, "case x: LoRA: needs Tunix's loop"),
        ({"release": "0.2.3", "lora_weight_qtype": "int8"}, "case x: lora_weight_qtype: is QLoRA without a rank"),
    ],
)
def test_a_bad_case_is_one_line(levers, said):
    with pytest.raises(ConfigError) as error:
        cases.Case(name="x", **levers)
    assert str(error.value).startswith(said) and "\n" not in str(error.value)


def test_another_release_runs_its_own_loop_from_its_own_source(monkeypatch, tmp_path):
    older = cases.Case(name="o", loop="native", release="0.2.2")
    assert older.module.endswith(".train_sft_deprecated")
    assert run.launcher(older)[2:] == ["bench.tpu.launcher", "release", older.module]
    monkeypatch.setenv("PYTHONPATH", f"/site:{tmp_path / 'src'}:/repo")
    monkeypatch.setenv("TPU_BENCH_DIR", str(tmp_path))
    said = run.cannot_start(older)
    assert said is not None and "\n" not in said
    assert said.startswith("case o: release 0.2.2's source is not in") and "bench.tpu.prepare --maxtext 0.2.2" in said
    (tmp_path / "src-0.2.2" / "maxtext").mkdir(parents=True)
    assert run.cannot_start(older) is None
    assert run.environment_for(older)["PYTHONPATH"] == f"/site:{tmp_path / 'src-0.2.2'}:/repo"


@pytest.mark.parametrize("release", [None, "0.2.3"])
def test_the_pinned_release_runs_through_the_vms_launcher_lora_as_the_pipeline_trains_it(monkeypatch, release):
    """Named or not, the pinned release is the VM's path (issue 74: a case without `release` stopped at import on the
    chip's Python 3.11, one naming 0.2.3 went another way and trained); a LoRA case's argv is the pipeline's."""
    monkeypatch.setenv("PYTHONPATH", "/site:/repo")
    lora = cases.Case(name="l", release=release, lora_rank=16, lora_weight_qtype="int8")
    assert run.launcher(lora)[2:] == ["bench.tpu.launcher", "pinned", "maxtext.trainers.post_train.sft.train_sft"]
    assert run.launcher(cases.Case(name="u", placement="unpatched"))[3] == "unpatched"
    assert run.cannot_start(lora) is None and run.environment_for(lora)["PYTHONPATH"] == "/site:/repo"
    argv = cases.maxtext_arguments(lora, "/w", "/d/c.parquet", "/tok")
    config = cases.PipelineConfig(
        dataset="/d/c.parquet", trainer="tunix", tuning="qlora", lora_rank=16, lora_alpha=32.0, lora_weight_qtype="int8"
    )
    assert config.adapter is not None
    adapter_argv = config.adapter.maxtext_options()
    assert adapter_argv[-1] == "lora.lora_weight_qtype=int8"  # the trainer's launcher takes it out, to quantise
    assert all(arg in argv for arg in adapter_argv) and any(a.startswith("sharding_tolerance=") for a in argv)


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


LAUNCHED_ON_3_11 = """
import runpy, sys, typing
if hasattr(typing, "override"):
    del typing.override  # as on Python 3.11, the lent chip's
sys.argv = ["launcher", *sys.argv[1:]]
runpy.run_module("bench.tpu.launcher", run_name="__main__")
"""


@pytest.mark.parametrize("how", ["pinned", "unpatched", "release"])
def test_every_way_the_bench_launches_gives_python_3_11_typing_override(tmp_path, how):
    """MaxText 0.2.3's post-training hooks do `from typing import override` (3.12): on the chip's 3.11 a case without
    `release` stopped there at import (issue 74). A module that imports it stands in for the trainer."""
    (tmp_path / "hooks_stand_in.py").write_text("from typing import override\nprint('trained', override.__module__)\n")
    env = {**os.environ, "PYTHONPATH": f"{tmp_path}{os.pathsep}{REPO}"}
    done = subprocess.run(
        [sys.executable, "-c", LAUNCHED_ON_3_11, how, "hooks_stand_in"], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.splitlines()[-1] == "trained typing_extensions"


def test_only_the_hosts_compiled_packages_differ_from_the_lock():
    """Issue 74: the host index's flax 0.12.8 stopped QLoRA on the chip, where the VM runs the lock's 0.12.4. Every
    pure-Python package is carried at the lock's version; host-index.txt keeps a line at another version only where it
    marks it compiled. A lock that moves a package the host index installs fails here until one or the other says so."""
    index, pins = packages.host_index(), lock.versions()
    assert [name for name, (version, compiled) in index.items() if version != pins.get(name) and not compiled] == []
    carried = {name for name, _ in packages.carried()}
    assert carried.isdisjoint(index) and carried <= set(pins)  # installed once, at the lock's version
    assert {"flax", "optax", "orbax-checkpoint", "qwix", "google-tunix"} <= carried


def test_the_results_name_the_locks_and_the_hosts_versions():
    found = packages.compared()
    assert {"jax", "jaxlib", "libtpu", "flax", "maxtext"} <= set(found)
    assert found["flax"]["lock"] == lock.versions()["flax"]
    assert packages.differing({"flax": {"lock": "0.12.4", "host": "0.12.8"}, "qwix": {"lock": "1", "host": "1"}}) == [
        "flax 0.12.8 (lock 0.12.4)"
    ]
    env = {"date": "d", "commit": "c", "jax": "0.10.2", "python": "3.11.7"}
    versions = {"jax": {"lock": "0.10.1", "host": "0.10.2"}}
    said = table.markdown({"environment": {**env, "packages": versions}, "cases": []})
    assert "The host's, not the lock's: jax 0.10.2 (lock 0.10.1)" in said


def _wheel(folder: Path, name: str, *requires: str) -> Path:
    import zipfile

    path = folder / f"{name}-1.0-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as archive:
        lines = [f"Name: {name}", "Version: 1.0", *(f"Requires-Dist: {r}" for r in requires)]
        archive.writestr(f"{name}-1.0.dist-info/METADATA", "\n".join(lines) + "\n")
    return path


def test_prepare_names_a_carried_wheels_requirement_the_host_would_not_meet(tmp_path):
    """transformers 5.11.0 refuses at import a tokenizers above 0.23.0, and the host index has 0.23.2: carried at the
    lock's version with the host's tokenizers, it would have stopped every case. The lock's own overrides pass."""
    index = packages.host_index()
    pyarrow = index["pyarrow"][0]
    wheels = [
        _wheel(tmp_path, "needs_old_pyarrow", f"pyarrow<{pyarrow}", "pyarrow; python_version < '3.10'"),
        _wheel(tmp_path, "fine", f"pyarrow>={pyarrow}", "safetensors<0.8", "unheard-of>=9", "pytest; extra == 'x'"),
    ]
    assert prepare.unmet(wheels) == [
        f"needs_old_pyarrow-1.0-py3-none-any.whl needs pyarrow<{pyarrow}, and the host will have pyarrow {pyarrow}"
    ]
