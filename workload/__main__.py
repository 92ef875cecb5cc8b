"""python -m workload: the on-VM SFT pipeline (seed steps 4–6) around real MaxText.

  commands  print the exact MaxText command lines and environments a run would use (a dry run)
  run       convert → train → export → verify → keep (→ eval), resumable and idempotent; JSON-lines events on
            stdout (schema: workload/run/events.py, summary: workload/run/pipeline.py), raw logs in WORK/logs

`run` needs the MaxText venv's Python (it starts MaxText with the interpreter it runs under). CFG.json is
`PipelineConfig.to_mapping()` JSON (stack keys without the `tpu-sft:` prefix). The HF token comes from
--hf-token-file (mode 0600) or HF_TOKEN, and reaches MaxText only as a 0600 file named by HF_TOKEN_PATH (that
file itself, or a private temporary copy of $HF_TOKEN), never as HF_TOKEN, which MaxText would copy into its
TensorBoard files.
It leaves: scratch outputs, logs and done-markers in WORK; checkpoints and TensorBoard logs in RUNS (--runs-dir,
default WORK); the kept model, metrics, TensorBoard logs,
loss curve and manifest in OUTPUT/<run name>/, and a copy of them in COPY/<run name>/ (--kept-copy-dir, a gs://
prefix: the model is fetched from there with no VM).
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys

from workload.core import last_resort
from workload.core.accelerators import ACCELERATORS
from workload.core.config import ConfigError, PipelineConfig
from workload.core.contract import EXIT_BAD_INPUT, EXIT_UNEXPECTED, PHASE_UNTIL
from workload.core.data_source import parse_share
from workload.core.one_line_parser import OneLineParser
from workload.launch.hf_token import TokenError, read_token, redactor, token_file_env, without_token
from workload.launch.jax_process import JaxProcess
from workload.run import boot_resume, commands, slice_rejoin, storage
from workload.run.events import Events
from workload.run.layout import Layout
from workload.run.pipeline import ORDER, run
from workload.run.resume_budget import BootResume
from workload.run.steps import Context
from workload.spend.bill import Meter

RUNS_DIR_HELP = (
    "where training checkpoints, TensorBoard logs and step records persist, so a new VM resumes: "
    "a gs://bucket/prefix or a directory (default: the work dir, lost with the VM)"
)
DEFAULT_WORK_DIR = "/dev/shm"  # the seed's scratch: fast, and lost on reboot (hence `keep`)
PHASE_ENDS = tuple(PHASE_UNTIL.values())  # the steps after which --phase-summaries prints a summary


def load_config(path: str) -> PipelineConfig:
    try:
        with open(path, encoding="utf-8") as f:
            raw = json.load(f)
    except (OSError, ValueError) as error:
        raise ConfigError(
            path, f"cannot read settings JSON ({error})", "pass PipelineConfig.to_mapping() JSON"
        ) from None
    if not isinstance(raw, dict):
        raise ConfigError(path, "settings JSON must be an object", "pass PipelineConfig.to_mapping() JSON")
    return PipelineConfig.from_mapping(raw)


def check_writable_dir(flag: str, path: str) -> None:
    """`path` is a directory this process can write into, or can be created as one (it is not created here).
    A gs:// prefix is checked by its first write (the VM's service account, not this process, holds the grant)."""
    if storage.is_remote(path):
        return
    absolute = os.path.abspath(path)
    existing = absolute
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        problem = f"{path} is not a directory" if existing == absolute else f"{existing} is a file, not a directory"
    elif not os.access(existing, os.W_OK | os.X_OK):
        problem = f"{existing} is not writable"
    else:
        return
    raise ConfigError(flag, problem, "give a directory you can write to (it is created if missing)")


def _layout(
    config: PipelineConfig,
    work_dir: str,
    output_dir: str,
    runs_dir: str | None = None,
    kept_copy_dir: str | None = None,
) -> Layout:
    def located(url: str) -> str:
        return url if storage.is_remote(url) else os.path.abspath(url)

    runs = None if runs_dir is None else located(runs_dir)
    copy = None if kept_copy_dir is None else located(kept_copy_dir)
    return Layout(os.path.abspath(work_dir), located(output_dir), config.model, commands.run_name(config), runs, copy)


def worker_of(config: PipelineConfig, args: argparse.Namespace) -> JaxProcess:
    """This host's place in the slice, which must have as many workers as the accelerator type has hosts
    (the tiny profile runs on CPUs: any number)."""
    worker = JaxProcess.from_flags(args.worker_id, args.worker_hostnames)
    hosts = ACCELERATORS[config.accelerator_type].hosts
    if config.profile != "tiny" and worker.count != hosts:
        raise ConfigError(
            "--worker-hostnames",
            f"names {worker.count} worker(s), but {config.accelerator_type} has {hosts} host(s)",
            f"list all {hosts} hosts of the slice, in worker-id order",
        )
    if worker.multi_host and args.runs_dir is None:
        raise ConfigError(
            "--runs-dir",
            "is missing on a multi-host slice, whose workers write one checkpoint together",
            "give a gs://bucket/prefix every worker can reach",
        )
    return worker


def held_out_files(config: PipelineConfig) -> None:
    """A held-out share is cut from the local file by `pulumi up` (infra/config/local_data.py); on the host, where
    nothing cuts it, MaxText needs the held-out files themselves."""
    if parse_share(config.eval_data) is not None:
        raise ConfigError(
            "tpu-sft:evalData",
            f"is the share {config.eval_data}, which `pulumi up` cuts from a local file, and nothing cuts it here",
            "give the held-out file's path (or run through pulumi up)",
        )


def length_in_tokens(config: PipelineConfig) -> None:
    """`pulumi up` turns epochs into tokens by the data preflight's count of the data (infra/config/data_size.py); on
    the host, where nothing counts it, the length must come as tokens or steps."""
    if config.epochs is not None:
        raise ConfigError(
            "tpu-sft:epochs",
            "are counted in the training data's tokens by `pulumi up`, and nothing counts them here",
            "give tpu-sft:tokens instead (or run through pulumi up)",
        )


def cmd_commands(args: argparse.Namespace) -> int:
    config = load_config(args.config)
    held_out_files(config)
    length_in_tokens(config)
    layout = _layout(config, args.work_dir, args.output_dir, args.runs_dir)
    hostname = args.hostname or socket.gethostname()
    worker = worker_of(config, args)
    for command in commands.pipeline_commands(config, layout, commands.OnHost(args.python, hostname, worker)):
        print(commands.render(command), end="\n\n")
    return 0


def cmd_run(args: argparse.Namespace) -> int:
    events = Events()
    try:
        config = load_config(args.config)
        held_out_files(config)
        length_in_tokens(config)
        token = read_token(args.hf_token_file, os.environ)
        worker = worker_of(config, args)
        check_writable_dir("--work-dir", args.work_dir)
        check_writable_dir("--output-dir", args.output_dir)
    except (ConfigError, TokenError) as error:
        events.emit("error", phase="setup", cause=str(error), log=None, tail=[])
        events.emit("summary", ok=False, until=args.until, failed_step="setup", error=str(error), logs=[])
        return EXIT_BAD_INPUT
    accelerator = ACCELERATORS[config.accelerator_type]
    with token_file_env(args.hf_token_file, token) as token_env:
        context = Context(
            config=config,
            layout=_layout(config, args.work_dir, args.output_dir, args.runs_dir, args.kept_copy_dir),
            events=events,
            python=sys.executable,
            hostname=socket.gethostname(),
            base_env={**without_token(os.environ), **token_env},
            scrub=redactor(token),
            token=token,
            package_root=os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
            # The tiny profile runs on a CPU (the rehearsal, tests): no chips, so no bill.
            meter=None
            if config.profile == "tiny"
            else Meter(accelerator.chips // accelerator.hosts, hosts=accelerator.hosts),
            worker=worker,
            finish_install=None if args.finish_install is None else os.path.abspath(args.finish_install),
            required_mount=args.required_mount,
            # Absolute now: the steps run in the work dir, and the run's job passes it relative to its own (code) dir.
            eval_python=None if args.eval_python is None else os.path.abspath(args.eval_python),
        )
        return run(context, args.until, PHASE_ENDS if args.phase_summaries else (), boot_resume_of(args))


def boot_resume_of(args: argparse.Namespace) -> BootResume | None:
    """The budget's terms where the VM's start-up began this attempt (workload/run/boot_resume.py), else None."""
    if args.boot_resume_of is None:
        return None
    if args.boot_resumes is None or args.resume_deadline_hours is None:
        flags = f"{boot_resume.RESUMES_FLAG} and {boot_resume.DEADLINE_FLAG}"
        raise ConfigError(boot_resume.RESUME_OF_FLAG, f"needs {flags}", "pass all three, as the VM's start-up does")
    return BootResume(args.boot_resume_of, args.boot_resumes, args.resume_deadline_hours, args.slice_wait_seconds)


def parser() -> argparse.ArgumentParser:
    top = OneLineParser.from_doc("python -m workload", __doc__)
    sub = top.add_subparsers(dest="command", required=True)

    show = sub.add_parser("commands", help="print the MaxText commands a run would use, copy-pasteable")
    show.add_argument("--config", required=True, help="settings JSON (PipelineConfig.to_mapping())")
    show.add_argument("--work-dir", default=DEFAULT_WORK_DIR, help=f"scratch dir (default {DEFAULT_WORK_DIR})")
    show.add_argument("--output-dir", default="output", help="persistent dir for what is kept")
    show.add_argument("--runs-dir", help=RUNS_DIR_HELP)
    show.add_argument("--python", default="python3", help="interpreter shown in the commands (default python3)")
    show.add_argument("--hostname", help="TPU_NAME (default: this machine's hostname)")
    _worker_flags(show)
    show.set_defaults(handler=cmd_commands)

    go = sub.add_parser("run", help="run the pipeline (JSON-lines events on stdout; last line: summary)")
    go.add_argument("--config", required=True, help="settings JSON (PipelineConfig.to_mapping())")
    go.add_argument("--work-dir", default=DEFAULT_WORK_DIR, help=f"scratch dir (default {DEFAULT_WORK_DIR})")
    go.add_argument("--output-dir", required=True, help="persistent dir; the run is kept in OUTPUT/<run name>/")
    go.add_argument("--runs-dir", help=RUNS_DIR_HELP)
    go.add_argument(
        "--kept-copy-dir",
        metavar="COPY",
        help="where keep also copies the run (COPY/<run name>/, manifest last): a gs:// prefix readable with no VM",
    )
    go.add_argument(
        "--until",
        choices=ORDER,
        default="keep",
        help="last step to run (default keep: all but eval, which needs --eval-python; the VM's run asks for eval)",
    )
    go.add_argument(
        "--eval-python",
        metavar="PYTHON",
        help="the eval venv's interpreter (lm-eval; on a TPU VM also vLLM TPU), which the eval step runs lm-eval with",
    )
    go.add_argument("--hf-token-file", help="file holding the HF token, mode 0600 (default: $HF_TOKEN)")
    go.add_argument(
        "--finish-install",
        metavar="SCRIPT",
        help="a shell script to run before the first step after convert (the install steps convert ran beside)",
    )
    go.add_argument(
        "--required-mount", metavar="PATH", help="a mount point that must be mounted before keep (the data disk)"
    )
    go.add_argument(
        "--phase-summaries",
        action="store_true",
        help="also print a summary as each phase's last step before --until ends (the run a phase task follows)",
    )
    go.add_argument(
        boot_resume.RESUME_OF_FLAG,
        metavar="ATTEMPT",
        help="the VM's start-up began this attempt, as ATTEMPT died with its boot (workload/run/boot_resume.py)",
    )
    go.add_argument(boot_resume.RESUMES_FLAG, type=int, help="with it: boot-resumes allowed without a newer checkpoint")
    go.add_argument(boot_resume.DEADLINE_FLAG, type=float, help="with it: hours after the first boot-resume to stop")
    go.add_argument(
        boot_resume.WAIT_FLAG,
        dest="slice_wait_seconds",
        type=float,
        help=f"with it, on a slice: seconds worker 0 waits for the other hosts (default {slice_rejoin.WAIT_S:g})",
    )
    _worker_flags(go)
    go.set_defaults(handler=cmd_run)
    return top


def _worker_id(text: str) -> int:
    if not text.isascii() or not text.isdigit() or len(text) > 4:
        raise argparse.ArgumentTypeError(f"{text!r} is not a worker id (0, 1, 2, …)")
    return int(text)


def _worker_flags(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--worker-id", type=_worker_id, help="this host's worker id in a multi-host slice (0: the coordinator)"
    )
    sub.add_argument(
        "--worker-hostnames", metavar="H0,H1,…", help="every worker's hostname in worker-id order (default: one host)"
    )


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        return args.handler(args)
    except ConfigError as error:
        print(f"workload: {error}", file=sys.stderr)
        return EXIT_BAD_INPUT
    except Exception as error:  # noqa: BLE001  the last resort: one line and a log, never a traceback
        line = last_resort.report("workload", error, [os.environ.get("HF_TOKEN"), _token_in(args)])
        if args.command == "run":  # the summary stays the last stdout line, whatever happened
            Events().emit("summary", ok=False, until=args.until, failed_step=None, error=line, logs=[])
        print(f"workload: {line}", file=sys.stderr)
        return EXIT_UNEXPECTED


def _token_in(args: argparse.Namespace) -> str | None:
    """The token file's content, to keep it out of a crash log (best effort: it may be what failed)."""
    try:
        with open(getattr(args, "hf_token_file", None) or "", encoding="utf-8") as f:
            return f.read().strip() or None
    except (OSError, ValueError):
        return None


if __name__ == "__main__":
    sys.exit(main())
