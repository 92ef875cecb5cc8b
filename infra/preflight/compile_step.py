"""Preflight from the stack's side: compile a stack's training step before any VM exists, and remember the answer.

    scripts/preflight [--sweep | --take-sweep FILE | --data] [STACK_FILE | --stack NAME] [tpu-sft:KEY=VALUE ...]

reads the stack file (the one named, else --stack's, else the selected stack's: `pulumi stack --show-name`) as the
engine hands config to the program, applies the overrides as `pulumi config set` would, validates every setting,
and runs `python -m workload.preflight` (the compile: workload/preflight/__main__.py) on the train settings the VM
would get, in .maxtext-venv (scripts/maxtext-venv builds it from `$MAXTEXT_PYTHON`, a Python 3.12) or in
`$PREFLIGHT_PYTHON`, a Python that has MaxText. Nothing here imports MaxText, so `pulumi preview` stays fast.

Each answer is kept as .tpu-sft/preflight/<train fingerprint>.json: the fingerprint is of the train phase's
inputs (`PipelineConfig.phase_settings`), the accelerator type among them, so the same inputs are never compiled
twice, and `pulumi up` refuses a VM whose train inputs a preflight found not to fit (`refuse_a_known_misfit`).
`--sweep` finds the largest per-device batch that fits with room to spare (infra/preflight/batch_sweep.py), which a
stack with `tpu-sft:perDeviceBatchSize auto` then trains with (`take_the_sweeps_batch`); `--take-sweep FILE` keeps a
sweep's answer made elsewhere (the pull-request workflow's test job) after checking that it is this stack's.
`--data` checks the dataset instead of compiling (infra/preflight/data_preflight.py): exit 1 when a finding stops the
run; `--data --public-only` uses no credentials and says what it could not reach (the pull request's test job).
Exit status: 0 fits, 1 does not fit (with --sweep: no batch does), 2 bad input; any other is
workload.preflight's own (the compile failed).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path
from typing import Any

from infra.config.data_size import epochs_as_tokens
from infra.config.read_settings import AUTO, AUTO_BATCH_KEY, parse
from infra.config.settings import Settings
from infra.config.stack_file import chosen_stack_file, read_stack_config
from infra.preflight import batch_sweep, candidates
from infra.preflight.data_preflight import check_data
from workload.core.config import ConfigError, PipelineConfig, stack_key
from workload.core.contract import EXIT_BAD_INPUT, EXIT_UNEXPECTED
from workload.run.fingerprint import fingerprint

REPO = Path(__file__).resolve().parents[2]
CACHE = Path(".tpu-sft") / "preflight"  # under the project directory, where `pulumi up` runs the program
EXIT_DOES_NOT_FIT = 1  # workload.preflight's
# One more whenever what a record says changes, so that none is reused: 2, HBM is the compiler's peak; 3, a step over
# the chip's HBM does not fit even where the compiler accepted it; 4, Tunix 0.1.7's step, without the logits; 5, the
# verdict counts the eval step and what the loop holds beside the step; 6, the verdict holds the chip's margin; 7, the
# step of the stack's loop (MaxText's own compiled by its train_compile), its levers, and its cost and predicted time.
RECORD_FORMAT = 7


def _named(train_inputs: dict[str, Any], maxtext_overrides: tuple[str, ...]) -> str:
    return fingerprint({"train": train_inputs, "maxtext": list(maxtext_overrides), "format": RECORD_FORMAT})


def train_fingerprint(pipeline: PipelineConfig, maxtext_overrides: tuple[str, ...] = ()) -> str:
    """What names one compile: the train phase's inputs and any MaxText options added to them (tests)."""
    return _named(pipeline.phase_settings("train"), maxtext_overrides)


def record_path(pipeline: PipelineConfig, maxtext_overrides: tuple[str, ...] = ()) -> Path:
    return CACHE / f"{train_fingerprint(pipeline, maxtext_overrides)}.json"


def sweep_path(pipeline: PipelineConfig, maxtext_overrides: tuple[str, ...] = ()) -> Path:
    """A sweep's answer: named by the train inputs but the batch, which the sweep chooses."""
    inputs = {k: v for k, v in pipeline.phase_settings("train").items() if k != "perDeviceBatchSize"}
    return CACHE / f"sweep-{_named(inputs, maxtext_overrides)}.json"


def take_the_sweeps_batch(settings: Settings) -> Settings:
    """With `perDeviceBatchSize auto`, the settings with the configuration a sweep of these train inputs chose: its
    batch, and its levers where the stack leaves them unset (infra/preflight/candidates.py); else as they are. They are
    then ordinary train inputs: they name the run and decide re-runs like values set by hand, so the same sweep answer
    always gives the same run."""
    if not settings.batch_auto:
        return settings
    path = sweep_path(settings.pipeline)
    try:
        chosen = json.loads(path.read_text())["chosen"]
    except FileNotFoundError:
        raise ConfigError(
            f"tpu-sft:{AUTO_BATCH_KEY}",
            f"is {AUTO}, which takes a sweep's answer, and no sweep of these train inputs is in {CACHE}",
            "run scripts/preflight --sweep (it compiles here, no TPU needed), or set a number",
        ) from None
    if chosen is None:
        raise ConfigError(
            f"tpu-sft:{AUTO_BATCH_KEY}",
            f"is {AUTO}, and the sweep ({path}) found no configuration that fits with the chip's margin",
            "set a shorter tpu-sft:maxTargetLength or a larger tpu-sft:acceleratorType",
        )
    return replace(settings, pipeline=_with(settings.pipeline, chosen, path), batch_auto=False)


def sweep_choice(settings: Settings) -> dict[str, str | None] | None:
    """What the preview shows of an auto stack's sweep: the configuration chosen and the runner-up, in words, each
    with its predicted tokens/s per chip and MFU; None for a stack that sets its batch. Call it after
    take_the_sweeps_batch, which has read the same answer."""
    if not settings.batch_auto:
        return None
    answer = json.loads(sweep_path(settings.pipeline).read_text())
    runner_up = answer["runner_up"]
    return {
        "chosen": candidates.describe(answer["chosen"]),
        "runnerUp": None if runner_up is None else candidates.describe(runner_up),
    }


def _with(pipeline: PipelineConfig, chosen: dict[str, Any], answer: Path) -> PipelineConfig:
    """The settings with the chosen row's, each validated as the stack's own (a sweep's answer may come from
    elsewhere: take_sweep)."""
    try:
        return PipelineConfig.from_mapping({**pipeline.to_mapping(), **candidates.settings_of(chosen)})
    except (ConfigError, KeyError, TypeError) as error:
        problem = f"chooses settings this stack cannot take ({error})"
        raise ConfigError(str(answer), problem, "run scripts/preflight --sweep here") from None


def take_sweep(answer_file: Path, pipeline: PipelineConfig) -> None:
    """Keep a sweep's answer made elsewhere, only if it is named for these train inputs and says what `auto`
    reads: a configuration of settings this stack takes, and nothing that runs."""
    path = sweep_path(pipeline)
    try:
        answer = json.loads(answer_file.read_text())
    except (OSError, ValueError) as error:
        unreadable = f"cannot be read as JSON ({error})"
        raise ConfigError(str(answer_file), unreadable, "run scripts/preflight --sweep here") from None
    if not isinstance(answer, dict) or not isinstance(answer.get("chosen", {}), (dict, type(None))):
        raise ConfigError(str(answer_file), "is not a sweep's answer", "run scripts/preflight --sweep here")
    if answer.get("sweep_fingerprint") != path.stem.removeprefix("sweep-"):
        raise ConfigError(str(answer_file), "is a sweep of other train inputs", "run scripts/preflight --sweep here")
    chosen = answer.get("chosen")
    if chosen is not None:
        batch = chosen.get("per_device_batch_size")
        if type(batch) is not int or batch < 1:
            raise ConfigError(str(answer_file), f"names {batch!r} as a batch", "run scripts/preflight --sweep here")
        _with(pipeline, chosen, answer_file)
    keep(path, answer)


def known_record(pipeline: PipelineConfig, maxtext_overrides: tuple[str, ...] = ()) -> dict[str, Any] | None:
    """What a preflight of exactly these train inputs kept here, if one ran."""
    try:
        return json.loads(record_path(pipeline, maxtext_overrides).read_text())
    except FileNotFoundError:
        return None


def refuse_a_known_misfit(pipeline: PipelineConfig) -> None:
    """Raise ConfigError when a preflight of exactly these train inputs found that the step does not fit, naming the
    setting the preflight's own verdict asks to change (a record kept before it said so: the batch)."""
    record = known_record(pipeline)
    if record is None or record["fits"]:
        return
    fix = record.get("fix") or {
        "key": "tpu-sft:perDeviceBatchSize",
        "fix": "pulumi config set tpu-sft:perDeviceBatchSize with a smaller batch (scripts/preflight says which fit), "
        "or set a shorter tpu-sft:maxTargetLength",
    }
    value = pipeline.to_mapping().get(fix["key"].removeprefix(stack_key("")))
    raise ConfigError(
        fix["key"],
        f"is {value}, and a preflight of these train inputs ({record_path(pipeline)}) found that the step needs at "
        f"least {record['hbm_bytes_per_chip'] / 2**30:.2f} GiB of HBM per chip of a {record['accelerator']}, "
        f"{record['hbm_limit_bytes_per_chip'] / 2**30:.2f} GiB allowed: no VM is created for it",
        fix["fix"],
    )


def hbm_beside_preflight(train_summary: dict[str, Any], pipeline: PipelineConfig) -> dict[str, Any]:
    """The chips' measured HBM peak (the train summary's, workload/measure/hbm_peak.py) beside what a preflight of these
    train inputs said, when one is on file here: the estimate checked against the chip. Joined here, not on the
    VM: the record is this machine's, and it is no input of the train phase (it would re-run the phase)."""
    measured = train_summary.get("hbm_peak_bytes_per_chip")
    record = known_record(pipeline)
    estimate = None if record is None else record["hbm_bytes_per_chip"]
    return {
        "measuredPeakBytes": measured,
        "limitBytes": train_summary.get("hbm_bytes_limit_per_chip"),
        "preflightBytes": estimate,
        "measuredOverPreflight": round(measured / estimate, 3) if measured and estimate else None,
        "reason": train_summary.get("hbm_reason") if measured is None else None,
    }


def with_overrides(raw: dict[str, str], overrides: list[str]) -> dict[str, str]:
    """`KEY=VALUE` arguments applied as `pulumi config set KEY VALUE` would: a string value, the key qualified."""
    result = dict(raw)
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep or ":" not in key:
            raise ConfigError(
                override, "is not an override", "give tpu-sft:KEY=VALUE, e.g. tpu-sft:perDeviceBatchSize=2"
            )
        result[key] = value
    return result


def maxtext_python() -> str:
    """Not `$MAXTEXT_PYTHON`: everywhere else (scripts/maxtext-venv, scripts/test, the workflow) that is the bare
    Python 3.12 the venv is built from, which has no MaxText."""
    python = os.environ.get("PREFLIGHT_PYTHON") or str(REPO / ".maxtext-venv" / "bin" / "python")
    if not os.access(python, os.X_OK):
        raise ConfigError(
            "PREFLIGHT_PYTHON",
            f"{python} is not an executable Python",
            "run scripts/maxtext-venv, or point PREFLIGHT_PYTHON at a Python that has MaxText",
        )
    return python


def compile_once(
    pipeline: PipelineConfig, price_per_chip_hour: float, maxtext_overrides: tuple[str, ...] = ()
) -> tuple[int, dict[str, Any] | None, bool]:
    """(exit status, the record, whether it came from the cache). Runs workload.preflight unless these inputs
    have a record; its stderr (the progress, the line when it does not fit) passes through as it comes, its stdout
    but the JSON line after it ends."""
    known = known_record(pipeline, maxtext_overrides)
    if known is not None:
        return (0 if known["fits"] else EXIT_DOES_NOT_FIT), known, True
    path = record_path(pipeline, maxtext_overrides)
    with tempfile.NamedTemporaryFile("w", suffix=".json", prefix="tpu-sft-preflight-") as settings:
        json.dump(pipeline.to_mapping(), settings)
        settings.flush()
        argv = [maxtext_python(), "-m", "workload.preflight", "--settings", settings.name]
        argv += ["--usd-per-chip-hour", str(price_per_chip_hour)]
        argv += [f"--maxtext={option}" for option in maxtext_overrides]
        returncode, stdout = run_compile(argv)
    lines = stdout.splitlines()
    sys.stdout.write("".join(f"{line}\n" for line in lines[:-1]))
    if returncode not in (0, EXIT_DOES_NOT_FIT) or not lines:
        return (returncode or EXIT_UNEXPECTED), None, False
    record = {**json.loads(lines[-1]), "levers": candidates.levers(pipeline), "train_fingerprint": path.stem}
    keep(path, record)
    return returncode, record, False


def run_compile(argv: list[str]) -> tuple[int, str]:
    """(exit status, stdout) of the compile; stopped with this process by SIGTERM (`stop_on_sigterm`), even when
    the SIGTERM comes while the compile is being started, before anything here holds it to stop it."""
    _Sigterm.starting = True
    try:
        process = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, text=True)
    except BaseException:
        _Sigterm.starting = False
        raise
    with process:
        try:
            _Sigterm.starting = False
            if _Sigterm.held is not None:
                signum, _Sigterm.held = _Sigterm.held, None
                _stop(signum, None)
            stdout, _ = process.communicate()
        except BaseException:  # SystemExit from _stop, KeyboardInterrupt: the compile ends with this process
            process.kill()
            raise
    return process.returncode, stdout


def keep(path: Path, answer: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_suffix(".tmp")
    temporary.write_text(json.dumps(answer, indent=1) + "\n")
    temporary.replace(path)  # whole or not at all: `pulumi up` reads it


def parser() -> argparse.ArgumentParser:
    top = argparse.ArgumentParser(prog="scripts/preflight", description=__doc__.split("\n\n")[0])
    top.add_argument(
        "stack_file", nargs="?", type=Path, help="Pulumi.<stack>.yaml (default: --stack's, else the selected stack's)"
    )
    top.add_argument("--stack", metavar="NAME", help="the stack whose Pulumi.<NAME>.yaml to read, not the selected one")
    top.add_argument("overrides", nargs="*", metavar="tpu-sft:KEY=VALUE", help="as `pulumi config set` would set")
    top.add_argument(
        "--sweep",
        action="store_true",
        help="from the stack's per-device batch, double (or halve) it and name the largest that fits with the chip's "
        "margin (docs/preflight.md)",
    )
    top.add_argument(
        "--take-sweep", type=Path, metavar="FILE", help="keep this sweep's answer for the stack, compiling nothing"
    )
    top.add_argument(
        "--data",
        action="store_true",
        help="read a sample of the dataset with the model's tokenizer and say what stops the run (docs/data.md)",
    )
    top.add_argument(
        "--public-only",
        action="store_true",
        help="with --data: use no credentials, and say which data that leaves unchecked (a pull request's check)",
    )
    top.add_argument(
        "--rows",
        type=int,
        metavar="N",
        help="with --data: read at most N rows of each part (default 2000); a file of at most N is counted exactly",
    )
    top.add_argument("--maxtext", action="append", default=[], metavar="KEY=VALUE", help=argparse.SUPPRESS)
    return top


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_intermixed_args(argv)  # an option between the overrides, as users type them
    try:
        stack_file = args.stack_file or chosen_stack_file(REPO, args.stack)
        stack = stack_file.name.removeprefix("Pulumi.").removesuffix(".yaml")
        raw = with_overrides(read_stack_config(stack_file), args.overrides)
        if args.data:  # the run's length changes nothing the data check reads; epochs waits for its answer
            raw = {key: value for key, value in raw.items() if key != stack_key("epochs")}
        settings = parse(epochs_as_tokens(raw)[0], stack=stack)
        if args.data:
            with contextlib.suppress(ConfigError):  # perDeviceBatchSize auto: named as `pulumi up` names it
                settings = take_the_sweeps_batch(settings)
            return check_data(settings, maxtext_python, str(REPO), args.public_only, args.rows)
        if args.sweep:
            return sweep(settings.pipeline, settings.tpu_price.usd_per_chip_hour, tuple(args.maxtext))
        if args.take_sweep:
            take_sweep(args.take_sweep, settings.pipeline)
            return 0
        if settings.batch_auto and not sweep_path(settings.pipeline).exists():
            status = sweep(
                settings.pipeline, settings.tpu_price.usd_per_chip_hour, tuple(args.maxtext)
            )  # what auto takes
            if status:
                return status
        settings = take_the_sweeps_batch(settings)
        status, record, from_cache = compile_once(
            settings.pipeline, settings.tpu_price.usd_per_chip_hour, maxtext_overrides=tuple(args.maxtext)
        )
    except ConfigError as error:
        print(f"preflight: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if record is None:
        return status  # workload.preflight said why, in one line on stderr
    if from_cache:
        print(f"preflight: these train inputs were compiled before ({CACHE}): {summary(record)}", file=sys.stderr)
    print(json.dumps(record), flush=True)
    return status


def sweep(pipeline: PipelineConfig, price_per_chip_hour: float, maxtext_overrides: tuple[str, ...]) -> int:
    """Each candidate configuration's batch search (infra/preflight/candidates.py, infra/preflight/batch_sweep.py), then
    the ranking of every configuration that fits by its predicted tokens/s per chip: the answer names the chosen one and
    the runner-up, and the stack's own levers' largest batch."""

    def compile_one(candidate: PipelineConfig) -> tuple[int, dict[str, Any] | None]:
        status, record, _ = compile_once(candidate, price_per_chip_hour, maxtext_overrides)
        return status, record

    searched: list[dict[str, Any]] = []
    own: list[dict[str, Any]] = []
    for configuration in candidates.configurations(pipeline):
        status, records = batch_sweep.sweep(configuration, compile_one)
        if status:
            return status  # workload.preflight said why, in one line on stderr
        searched += records
        own = own or records  # the first configuration is the stack's own levers
    path = sweep_path(pipeline, maxtext_overrides)
    ranking = candidates.ranked(searched)
    result = {
        **batch_sweep.answer(pipeline, own),
        "ranking": ranking,
        "chosen": ranking[0] if ranking else None,
        "runner_up": ranking[1] if len(ranking) > 1 else None,
        "sweep_fingerprint": path.stem.removeprefix("sweep-"),
    }
    keep(path, result)
    print(batch_sweep.table(result))
    print(ranking_lines(result))
    print(json.dumps(result), flush=True)
    return 0 if result["chosen"] is not None else batch_sweep.EXIT_NONE_FITS


def ranking_lines(result: dict[str, Any]) -> str:
    """The chosen configuration and the runner-up, in words."""
    if result["chosen"] is None:
        return "No configuration fits: nothing chosen."
    lines = [f"Chosen: {candidates.describe(result['chosen'])}"]
    if result["runner_up"] is not None:
        lines.append(f"Runner-up: {candidates.describe(result['runner_up'])}")
    return "\n".join(lines)


def summary(record: dict[str, Any]) -> str:
    used, limit = record["hbm_bytes_per_chip"] / 2**30, record["hbm_limit_bytes_per_chip"] / 2**30
    verdict = "fits" if record["fits"] else "does not fit"
    return f"{verdict} on a {record['accelerator']}: {used:.2f} GiB of HBM per chip of {limit:.2f} GiB"


class _Sigterm:
    starting = False  # run_compile is starting the compile: nothing holds it yet
    held: int | None = None  # the signal that came meanwhile, for run_compile to act on once it holds the compile


def _stop(signum: int, _frame: object) -> None:
    if _Sigterm.starting:
        _Sigterm.held = signum
        return
    print("preflight: stopped (SIGTERM); the compile is stopped too", file=sys.stderr)
    raise SystemExit(128 + signum)


def stop_on_sigterm() -> None:
    """SIGTERM (a cancelled CI job, a closed terminal) would end this process at once and leave the compile, its
    child, running on for minutes; raised as SystemExit it unwinds through run_compile, which kills the child."""
    signal.signal(signal.SIGTERM, _stop)
