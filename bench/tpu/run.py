"""python -m bench.tpu.run CASES.json --out DIR: the real training step on this host's TPU, one case after another.

Each case trains Gemma 3 4B cut to a few of its layers, with random weights, through the project's own trainer
launcher (workload/launch/trainer_launcher.py: every patch the VM's trainer gets, started by bench/tpu/launcher.py on
the host's Python), with the argv the pipeline builds (bench/tpu/cases.py) on UltraChat-shaped conversations it
writes itself, with the Gemma 3 tokenizer and chat template of the tiny profile. A case that cannot start on this
host is said in one line before the first starts, and recorded as not started. It writes into DIR:
- results.json: what ran (the commit, the case file, the digest of workload/launch, per package the lock's version
  and this host's), and per case its levers and what the chip did: trained or out of memory (with the first line and the
  bytes asked for), the median step time after the compile, tokens/s, TFLOP/s and MFU per chip against the peak of
  the chip's own kind, the HBM peak by `memory_stats()` (a floor: it misses the compiled step's temporaries), MaxText's
  compiled memory where it prints it, and, with --predictions, the preflight's verdict for the same case beside it;
  a `resume` case also the step each run began and ended at and the optimizer's counters in its last checkpoint;
- results.md: the same as a table; logs/: each trainer's whole output.
An out-of-memory error is a result, not a crash. A case that hangs is killed after --case-timeout seconds.

Needs MaxText, Tunix and this host's JAX importable, and DECOUPLE_GCLOUD=TRUE: bench/tpu/on-host sets that up.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from bench.tpu import cases as case_file
from bench.tpu import packages, prepare, smoke, table
from bench.tpu.cases import Case
from bench.tpu.reading import Reading, lora_flops_share
from workload.launch import data_in_process

REPO = Path(__file__).resolve().parents[2]
CONVERSATIONS = 6000  # ~700 k tokens: more than 12 steps of batch 24 × 2048 read
PAUSE_S = 5  # the chip can refuse a program started just after another ended
COUNTERS = REPO / "tests" / "workload" / "optimizer_steps.py"


def prepare_data(folder: Path) -> tuple[str, str]:
    """(the conversations' parquet file, the tokenizer's folder), written once."""
    from workload.tiny import assets

    data, tokenizer = folder / "conversations.parquet", folder / "tokenizer"
    if not data.exists():
        import pyarrow as pa
        import pyarrow.parquet as pq

        assets.build_tokenizer(str(tokenizer))
        pq.write_table(pa.Table.from_pylist(assets.conversations(CONVERSATIONS)), data)
    return str(data), str(tokenizer)


def launcher(case: Case) -> list[str]:
    """The trainer's command before its MaxText arguments (bench/tpu/launcher.py)."""
    return [sys.executable, "-m", "bench.tpu.launcher", case.launch, case.module]


def prepared() -> Path:
    return REPO / os.environ.get("TPU_BENCH_DIR", str(prepare.DEFAULT_DIR))


def cannot_start(case: Case) -> str | None:
    """Why the case cannot start on this host, in one line; None where it can."""
    if case.another_release:
        source = prepare.source_dir(prepared(), case.release)
        if not (source / "maxtext").is_dir():
            return (
                f"case {case.name}: release {case.release}'s source is not in {source}. "
                f"Fix: run python -m bench.tpu.prepare --maxtext {case.release} where there is network, then bring it"
            )
    return None


def environment_for(case: Case) -> dict[str, str]:
    """The trainer's environment: for another release, its source on PYTHONPATH in place of the pinned one's."""
    env = {**os.environ, data_in_process.ENV: "1", "PYTHONUNBUFFERED": "1"}
    if case.xla_flags:
        env["LIBTPU_INIT_ARGS"] = " ".join(case.xla_flags)
    if case.another_release:
        pinned, other = str(prepared() / "src"), str(prepare.source_dir(prepared(), case.release))
        paths = env.get("PYTHONPATH", "").split(os.pathsep)
        env["PYTHONPATH"] = os.pathsep.join(other if path == pinned else path for path in paths)
    return env


def train(case: Case, argv: list[str], log: Path, timeout_s: int, steps: int) -> dict[str, Any]:
    env = environment_for(case)
    started = time.monotonic()
    with log.open("w") as out:
        process = subprocess.Popen(
            [*launcher(case), *argv],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
            cwd=REPO,
            start_new_session=True,
        )
        killer = threading.Timer(timeout_s, os.killpg, (process.pid, signal.SIGKILL))
        killer.start()
        assert process.stdout is not None
        for line in process.stdout:
            out.write(line)
            if "completed step:" in line or "tpu-sft " in line:
                print(f"  {case.name}: {line.strip()[-160:]}", flush=True)
        returncode = process.wait()
        killer.cancel()
    summary = summarize(case, log, returncode, steps)
    summary["wall_s"] = round(time.monotonic() - started)
    if returncode == -signal.SIGKILL:
        summary["outcome"] = f"killed after {timeout_s} s"
    return summary


def summarize(case: Case, log: Path, returncode: int, steps: int) -> dict[str, Any]:
    """What a trainer's log says (bench/tpu/reading.py), for a run of `steps` steps that exited with `returncode`."""
    reading = Reading()
    with log.open() as lines:
        for line in lines:
            reading.observe(line)
    summary = reading.summary(returncode, last_step(case, steps))
    if case.lora_rank is not None and summary.get("mfu") is not None and "flops_split" in summary:
        summary["mfu_on_lora_flops"] = round(summary["mfu"] * lora_flops_share(summary["flops_split"]), 4)
    return summary


def last_step(case: Case, steps: int) -> int:
    """MaxText's own loop numbers its steps from 0, Tunix's from 1."""
    return steps - 1 if case.loop == "native" else steps


def counters(checkpoint: str) -> dict[str, int] | str:
    """The optimizer's integer counters in a checkpoint's optimizer state, or why they could not be read."""
    done = subprocess.run([sys.executable, str(COUNTERS), checkpoint], capture_output=True, text=True, cwd=REPO)
    return json.loads(done.stdout.splitlines()[-1]) if done.returncode == 0 else done.stderr.strip()[-400:]


def written(case: Case, work: Path) -> list[str]:
    checkpoints = Path(case_file.run_dir(str(work), case)) / "checkpoints"
    return sorted(p.name for p in checkpoints.iterdir()) if checkpoints.is_dir() else []


def run_case(case: Case, data: tuple[str, str], work: Path, logs: Path, timeout_s: int) -> dict[str, Any]:
    shutil.rmtree(work, ignore_errors=True)
    record: dict[str, Any] = {"case": dataclasses.asdict(case)}
    if not case.resume:
        argv = case_file.maxtext_arguments(case, str(work), *data)
        record |= train(case, argv, logs / f"{case.name}.log", timeout_s, case.steps)
        record["checkpoints_written"] = written(case, work)  # none asked for
        return record
    # A checkpoint at the first run's last step, then a second run of twice the steps that must go on from it.
    first = train(
        case, case_file.maxtext_arguments(case, str(work), *data), logs / f"{case.name}-save.log", timeout_s, case.steps
    )
    time.sleep(PAUSE_S)
    twice = 2 * case.steps
    second = train(
        case,
        case_file.maxtext_arguments(case, str(work), *data, steps=twice),
        logs / f"{case.name}-resume.log",
        timeout_s,
        twice,
    )
    checkpoint = os.path.join(case_file.run_dir(str(work), case), "checkpoints", str(twice), "optimizer_state")
    record |= {"save": first, "resume": second, "optimizer_counters_at_end": counters(checkpoint)}
    return record | {"outcome": resumed(case, second)}


def resumed(case: Case, second: dict[str, Any]) -> str:
    """The second run went on from the first's last step, to its own end."""
    went_on = (second.get("steps_logged") or [None])[0] == last_step(case, case.steps) + 1
    return "resumed" if went_on and second["outcome"] == "trained" else "did not resume"


def with_prediction(record: dict[str, Any], predictions: dict[str, Any]) -> dict[str, Any]:
    predicted = predictions.get("cases", {}).get(record["case"]["name"])
    if predicted is None:
        return record
    record["preflight"] = predicted
    measured = record.get("hbm_peak_bytes_per_chip")
    if measured and predicted.get("hbm_bytes_per_chip"):
        record["measured_over_predicted"] = round(measured / predicted["hbm_bytes_per_chip"], 3)
    if record.get("mfu") is not None and predicted.get("compiled_flops") and predicted.get("maxtext_flops"):
        # What the compiled step does, by XLA's count (remat's recompute in, a frozen weight's gradient out), for the
        # same step time: MaxText's MFU scaled by the two counts' ratio.
        ratio = predicted["compiled_flops"] / predicted["maxtext_flops"]
        record["mfu_on_compiled_flops"] = round(record["mfu"] * ratio, 4)
    return record


def environment(cases: Path) -> dict[str, Any]:
    import jax

    return {
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        # A copy of the working tree may carry another commit's .git: the caller can name the one it copied.
        "commit": os.environ.get("TPU_BENCH_COMMIT")
        or subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=REPO
        ).stdout.strip(),
        "jax": jax.__version__,
        "python": sys.version.split()[0],
        "cases_file": cases.name,
        # What of the launcher's code ran (bench/tpu/smoke.py): the suite holds the smoke's to the checkout's.
        "launch_digest": smoke.launch_digest(REPO),
        # Per package, the lock's version (what the VM runs) and the one this host imports (bench/tpu/packages.py).
        "packages": packages.compared(),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.tpu.run", description=__doc__.split("\n\n")[0])
    parser.add_argument("cases", type=Path, help="a case file (bench/tpu/cases/)")
    parser.add_argument("--out", type=Path, required=True, help="where results.json, results.md and logs/ go")
    parser.add_argument("--only", action="append", help="run only this case (repeatable)")
    parser.add_argument("--predictions", type=Path, help="python -m bench.tpu.predict's file, set beside each case")
    parser.add_argument("--case-timeout", type=int, default=420, help="seconds a case may run (default 420)")
    parser.add_argument("--work", type=Path, default=Path("/tmp/tpu-bench-work"), help="scratch (checkpoints)")
    args = parser.parse_args(argv)
    every = case_file.load(args.cases)
    unknown = sorted(set(args.only or ()) - {c.name for c in every})
    if unknown:
        raise SystemExit(f"--only {unknown[0]}: {args.cases} has no such case. Fix: name one of its cases")
    chosen = [c for c in every if not args.only or c.name in args.only]
    predictions = json.loads(args.predictions.read_text()) if args.predictions else {}
    logs = args.out / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    # Said before anything starts, one line a case: the others still run.
    refused = {case.name: why for case in chosen if (why := cannot_start(case))}
    for why in refused.values():
        print(f"bench/tpu/run: {why}", file=sys.stderr, flush=True)
    data = prepare_data(args.work / "data")
    results: dict[str, Any] = {
        "environment": environment(args.cases),
        "predictions": predictions.get("environment"),
        "cases": [],
    }
    differing = packages.differing(results["environment"]["packages"])
    print("the host's, not the lock's: " + (", ".join(differing) or "none"), flush=True)
    for number, case in enumerate(chosen):
        if case.name in refused:
            record = {"case": dataclasses.asdict(case), "outcome": f"not started: {refused[case.name]}"}
        else:
            if number:
                time.sleep(PAUSE_S)
            print(f"[{number + 1}/{len(chosen)}] {case.name}", flush=True)
            record = with_prediction(run_case(case, data, args.work / "run", logs, args.case_timeout), predictions)
        results["cases"].append(record)
        print(f"  {case.name}: {record.get('outcome')}", flush=True)
        # Written after every case: a host taken back mid-sweep still leaves what it measured.
        (args.out / "results.json").write_text(json.dumps(results, indent=1) + "\n")
        (args.out / "results.md").write_text(table.markdown(results) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
