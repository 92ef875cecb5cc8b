"""`python -m remote.stack VERB` (`scripts/tpu-sft VERB`): the user's commands against a deployed stack, run in the
project directory. The stack's outputs say where its VM and bucket are (remote/stack/outputs.py); "the run" is the
run's latest attempt on the VM (remote/stack/run_log.py), on a slice worker 0's, whose job (the same on every
worker) runs every step (remote/stack/reach.py).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import time
from pathlib import Path

from remote.exit_status import exit_status
from remote.ssh import flags, jobs
from remote.ssh.connection import Connection
from remote.ssh.errors import (
    EXIT_AUTH,
    EXIT_BAD_INPUT,
    EXIT_FAILED,
    EXIT_HOST_KEY,
    EXIT_NOT_FOUND,
    EXIT_OK,
    EXIT_UNREACHABLE,
    EXIT_VERIFY,
    RemoteError,
)
from remote.ssh.hosts import WorkerError, WorkerHost, each_said
from remote.stack import outputs as stack_outputs
from remote.stack import preemptions, publish_here, vm_state
from remote.stack.gcs import Gcs
from remote.stack.model import fetch_model
from remote.stack.reach import Reached, VmUnreachable, reach, vm_name
from remote.stack.run_log import bucket_log, job_log, last_checkpoint, latest_job
from workload.core.contract import EXIT_UNEXPECTED
from workload.core.one_line_parser import OneLineParser
from workload.eval import gate
from workload.run import run_state
from workload.run.progress import parse_event, render

log = logging.getLogger("remote")

RESUMES = "done steps and saved checkpoints stay; the next `pulumi up` resumes it"


EXIT_CODES = f"""exit codes:
  {EXIT_OK}   done
  {EXIT_FAILED}   a command on the VM, Cloud Storage or Compute Engine failed (the line says which)
  {EXIT_BAD_INPUT}   bad input: a flag, the stack (no pulumi CLI, an unknown stack), the SSH key missing
  {EXIT_HOST_KEY}  the VM's host key is not the one pinned
  {EXIT_NOT_FOUND}  nothing there yet: no VM in the stack, no run on the VM, no kept model
  {EXIT_AUTH}  the VM refused the stack's SSH key
  {EXIT_UNREACHABLE}  the VM does not answer SSH (`status` still says what it can)
  {EXIT_VERIFY}  `fetch-model`: a file does not match the manifest (nothing of it is kept)
  {EXIT_UNEXPECTED}  an unexpected error (a bug): stderr names the log file holding its traceback"""


class NoRun(RemoteError):
    exit_code = EXIT_NOT_FOUND


class CancelIncomplete(RemoteError):
    """A slice's job left running on a worker that could not be reached; its exit code is that worker's error's."""

    def __init__(self, message: str, exit_code: int):
        self.exit_code = exit_code
        super().__init__(message)


class _Parser(OneLineParser):
    bad_input_exit = EXIT_BAD_INPUT


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(stream=sys.stderr, format="tpu-sft: %(message)s", level=logging.INFO)
    logging.getLogger("paramiko").setLevel(logging.CRITICAL)
    secrets = [os.environ.get(name) for name in ("HF_TOKEN", "PULUMI_CONFIG_PASSPHRASE")]  # kept out of the last resort
    return exit_status(lambda: args.func(args), interrupted="the run on the VM goes on", secrets=secrets)


def build_parser() -> argparse.ArgumentParser:
    common = _Parser(add_help=False)
    common.add_argument("--stack", metavar="NAME", help="the Pulumi stack (default: the selected one)")
    parser = _Parser(
        prog="scripts/tpu-sft",
        description="Ask the deployed stack about its run: where it stands, its log, cancel it, fetch the kept "
        "model. Run in the project directory; needs the `pulumi` CLI, and the stack's SSH key for the VM "
        "(gcloud too, through IAP). Changes nothing on the stack but what `cancel` says.",
        epilog=EXIT_CODES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    verbs = parser.add_subparsers(dest="verb", required=True, metavar="VERB")

    p = verbs.add_parser(
        "status",
        parents=[common],
        help="the run's step, step count, loss and ETA; the VM's state",
        description="Reads the run's log on the VM (on a slice, worker 0's, and every worker's state of the run's "
        "job); when the VM does not answer, what Compute Engine says of it and the run's log as last copied to the "
        "bucket. Leaves nothing behind.",
    )
    p.set_defaults(func=_status)

    p = verbs.add_parser(
        "logs",
        parents=[common],
        help="the run's log (from the bucket when the VM is gone)",
        description="Prints the run's log, one line per event (on a slice, worker 0's, which runs every step). "
        "With the VM gone, the copy the run kept beside its checkpoints (at most 15 s of training steps behind). "
        "Leaves nothing behind.",
    )
    p.add_argument("-f", "--follow", action="store_true", help="keep printing until the run ends (Ctrl-C: stop)")
    p.add_argument("--json", action="store_true", help="the raw event lines (workload/run/events.py)")
    p.set_defaults(func=_logs)

    p = verbs.add_parser(
        "cancel",
        parents=[common],
        help="stop the run cleanly (on a slice, on every worker); the next `pulumi up` resumes it",
        description="Stops the run's whole process session: SIGTERM, then SIGKILL after --grace. On a slice, the "
        "run's job is stopped on every worker at once (a worker left running would wait on the others); a worker "
        "whose job has ended keeps its state. Finished steps and saved checkpoints stay (a checkpoint being saved "
        "is not committed, and the resume takes the one before). The job's directory on each host stays, marked "
        "cancelled.",
    )
    p.add_argument("--grace", type=flags.grace_seconds, default=30.0, metavar="S", help="before SIGKILL (default 30)")
    p.set_defaults(func=_cancel)

    p = verbs.add_parser(
        "fetch-model",
        parents=[common],
        help="copy the kept model here, every file checked against its manifest",
        description="From the bucket, with no VM (a slice keeps the model there, a VM copies it there), else from "
        "its published Cloud Storage copy, else from the VM's data disk over SSH. Run again after a broken transfer: "
        "verified files are not "
        "fetched again, a partial one (.NAME.partial) continues. Leaves DIR (default models/<run name>), in the "
        "kept layout; its manifest.json is written last.",
    )
    p.add_argument("dir", nargs="?", type=Path, metavar="DIR")
    p.set_defaults(func=_fetch_model)

    p = verbs.add_parser(
        "publish",
        parents=[common],
        help="publish the kept model from the bucket, from this machine: no VM",
        description="The kept model in the checkpoint bucket, copied here, checked against its manifest and "
        "published as the `…-publish` task publishes it from the VM (python -m workload.publish), in "
        f"${publish_here.PYTHON_ENV} or .maxtext-venv's Python. Cloud Storage is written with this machine's "
        "Application Default Credentials, the Hub with $HF_WRITE_TOKEN. Sends only what the destination lacks.",
    )
    p.add_argument("--hub", metavar="OWNER/NAME", help="a Hub model repo (created private unless --public)")
    p.add_argument("--hub-adapter", metavar="OWNER/NAME", help="a Hub repo for a LoRA run's adapter")
    p.add_argument("--gcs", metavar="gs://BUCKET/PATH", help="a Cloud Storage path")
    p.add_argument("--public", action="store_true", help="create the Hub repos public")
    p.add_argument("--eval-gate", choices=gate.MODES, help=f"the quality gate (default {gate.DEFAULT_MODE})")
    p.add_argument("--eval-margin", type=float, metavar="POINTS", help="the gate's margin (default 2)")
    # What the `…-publish-from-bucket` task of `pulumi up` gives: the kept model's URL, as the stack's outputs are
    # being written while it runs, and the stack's write token on stdin.
    p.add_argument("--model", metavar="gs://BUCKET/kept/RUN", help="the kept model (default: the stack's)")
    p.add_argument("--token-stdin", action="store_true", help="read the Hub write token from stdin")
    p.set_defaults(func=_publish)
    return parser


def _show(line: str, raw: bool) -> None:
    if raw:
        print(line, flush=True)
        return
    event = parse_event(line)
    if event is None:
        print(line, flush=True)  # stderr the job's log caught
    elif event["event"] == "summary":
        print(f"summary: {line}", flush=True)
    elif (text := render(event)) is not None:
        print(text, flush=True)


def _copied_log(runs_dir: str | None) -> tuple[tuple[str, list[str]] | None, str]:
    """The copy of the run's log in the bucket (workload/run/log_mirror.py), or None and why there is none."""
    if not runs_dir or not runs_dir.startswith("gs://"):
        return None, "the run keeps no copy of its log off the VM (no checkpoint bucket)"
    try:
        found = bucket_log(Gcs.from_env(), runs_dir)
    except RemoteError as error:
        return None, f"its copy in the bucket could not be read: {error}"
    return found, "" if found else f"no copy of a run's log in {runs_dir} yet"


def _resumes(found: tuple[str, list[str]] | None) -> str:
    """From where a new VM resumes the run: the last checkpoint beside the log's copy in the bucket."""
    if found is None:
        return vm_state.RESUMES
    try:
        step = last_checkpoint(Gcs.from_env(), found[0])
    except RemoteError as error:
        return f"{vm_state.RESUMES} (the bucket's could not be listed: {error})"
    if step is None:
        return "the run resumes from step 0 (no checkpoint in the bucket yet)"
    return f"the run resumes from step {step}"


def _status(args) -> int:
    outputs = stack_outputs.read(args.stack)
    target = outputs.target()
    try:
        reached = reach(outputs, target)
    except VmUnreachable as error:
        found, why_not = _copied_log(target.profile.runs_dir)
        if error.state is not None and error.ssh:  # one VM's: which case it is, and from where a new VM resumes
            print(f"VM: {error.ssh}; {error.state.line(vm_name(outputs), _resumes(found))}")
        else:
            print(f"{'slice' if len(target.hosts) > 1 else 'VM'}: {error}")
        if (recovered := _recovery(outputs, None)) is not None:
            print(recovered)
        if found is None:
            print(f"run: unknown ({why_not})")
        else:
            print(f"run (its log as last copied to {found[0]}): {run_state.read(found[1]).line()}")
        return EXIT_UNREACHABLE
    with reached:
        print(_answering(outputs, reached))
        job = latest_job(reached.lead)
        if job is None:
            print("run: none started on the VM yet (`pulumi up` starts it)")
            if (recovered := _recovery(outputs, None)) is not None:
                print(recovered)
            return EXIT_OK
        states = reached.on_each(lambda _, conn: jobs.status(conn, job))
        print(f"run {job}: {states[0].state} · {run_state.read(job_log(reached.lead, job)).line()}")
        if reached.on_slice:
            print(f"workers: {each_said(reached.workers, [s.state for s in states])}")
        if (recovered := _recovery(outputs, job)) is not None:
            print(recovered)
    return EXIT_OK


def _recovery(outputs: stack_outputs.StackOutputs, job: str | None) -> str | None:
    """A VM in its group of one (tpu-sft:recovery auto): whether Google preempted it, and the attempt since."""
    project, zone, name = (outputs.text(k) for k in ("project", "zone", "instanceName"))
    if not (project and zone and name and outputs.text("instanceGroupName")):
        return None
    return preemptions.read(project, zone, name).line(name, job)


def _answering(outputs: stack_outputs.StackOutputs, reached: Reached) -> str:
    lead = reached.workers[0].host
    if reached.on_slice:
        return f"slice {vm_name(outputs)}: {len(reached.workers)} workers answer SSH (worker 0 at {lead})"
    return f"VM {vm_name(outputs)}: running (answers SSH at {lead})"


def _logs(args) -> int:
    outputs = stack_outputs.read(args.stack)
    target = outputs.target()
    try:
        reached = reach(outputs, target)
    except VmUnreachable as error:
        found, why_not = _copied_log(target.profile.runs_dir)
        if found is None:
            raise VmUnreachable(f"{error}; and {why_not}", error.state) from None
        more = " (nothing more will come from a VM that does not answer)" if args.follow else ""
        print(f"{error}; the run's log as last copied to {found[0]}{more}:", file=sys.stderr)
        for line in found[1]:
            _show(line, args.json)
        return EXIT_OK
    with reached:
        job = latest_job(reached.lead)
        if job is None:
            raise NoRun(f"no run has started on {reached.workers[0].host} yet: `pulumi up` starts it")
        if not args.follow:
            for line in job_log(reached.lead, job):
                _show(line, args.json)
            return EXIT_OK
        code = jobs.follow(reached.target, job, lambda line: _show(line, args.json), conn=reached.lead)
    print(f"the run ended (exit code {code})", file=sys.stderr)
    return EXIT_OK


def _cancel(args) -> int:
    outputs = stack_outputs.read(args.stack)
    target = outputs.target()
    with reach(outputs, target) as reached:
        job = latest_job(reached.lead)
        if job is None:
            raise NoRun(f"no run has started on {reached.workers[0].host}: nothing to cancel")
        if reached.on_slice:
            print(_cancel_on_slice(reached, job, args.grace))
            return EXIT_OK
        state = jobs.status(reached.lead, job)
        if state.terminal:
            print(f"run {job} already {state.state}: nothing to cancel")
            return EXIT_OK
        final = jobs.cancel(reached.lead, job, grace_s=args.grace)
    print(f"run {job} {final.state}: {RESUMES}")
    return EXIT_OK


def _cancel_on_slice(reached: Reached, job: str, grace_s: float) -> str:
    """The job stopped on every worker where it runs, all at once: a worker left running would wait on its
    collectives for the others. One that has ended keeps its state (a cancel would mark a dead one cancelled)."""
    states = reached.on_each(lambda _, conn: jobs.status(conn, job))
    if all(s.state != "running" for s in states):
        return f"run {job} already {states[0].state} on every worker: nothing to cancel"

    def stop(worker: WorkerHost, conn: Connection) -> jobs.JobStatus:
        said = states[worker.id]
        return jobs.cancel(conn, job, grace_s=grace_s) if said.state == "running" else said

    try:
        finals = reached.on_each(stop)
    except WorkerError as error:
        raise CancelIncomplete(
            f"run {job} is not cancelled on {error}; on the workers that answered it is: run `scripts/tpu-sft "
            "cancel` again",
            error.exit_code,
        ) from None
    where = each_said(reached.workers, [s.state for s in finals])
    return f"run {job} cancelled on {len(finals)} workers: {where}; {RESUMES}"


def _publish(args) -> int:
    given_gate = args.eval_gate is not None or args.eval_margin is not None
    where = publish_here.Destinations(
        hub=args.hub,
        hub_adapter=args.hub_adapter,
        gcs_uri=args.gcs,
        public=args.public,
        gate=(
            args.eval_gate or gate.DEFAULT_MODE,
            gate.DEFAULT_MARGIN_POINTS if args.eval_margin is None else args.eval_margin,
        )
        if given_gate
        else None,
    )
    root = Path(__file__).resolve().parents[2]
    if args.model is None:
        return publish_here.publish_from_bucket(
            stack_outputs.read(args.stack), Gcs.from_env(), where, root=root, environ=os.environ
        )
    token = sys.stdin.readline().strip() if args.token_stdin else None
    return publish_here.publish_kept_url(
        args.model, Gcs.from_env(), where, write_token=token, root=root, environ=os.environ
    )


def _fetch_model(args) -> int:
    outputs = stack_outputs.read(args.stack)
    last = {"at": 0.0}

    def progress(name: str, done: int, size: int) -> None:
        if done == size or time.monotonic() - last["at"] >= 5:
            last["at"] = time.monotonic()
            log.info("%s: %.1f of %.1f MB", name, done / 1e6, size / 1e6)

    fetched = fetch_model(outputs, args.dir, Gcs.from_env(), progress=progress)
    print(
        f"the model from {fetched.source} is in {fetched.local_dir}: {fetched.files} files match its manifest "
        f"({fetched.transferred} fetched now, {fetched.resumed} of them resumed; the rest were here already)"
    )
    return EXIT_OK
