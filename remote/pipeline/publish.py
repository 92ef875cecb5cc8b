"""`python -m remote publish`: what the `…-publish` task of `pulumi up` runs after the export phase, when the stack
names a destination (tpu-sft:publishGcsUri, tpu-sft:publishHubRepo, and a LoRA run's tpu-sft:publishHubAdapterRepo).

It finds the kept model where export left it (the profile's kept dir / the run's name, from the same pipeline
settings the export phase got), places the Hub write token from $HF_WRITE_TOKEN on the host (a 0600 file, over
SFTP) if one is given, and runs `python -m workload.publish` there as a detached job, followed to its end. The
workload's publish is idempotent: the same model again sends nothing, an interrupted one resumes. The last
stdout line is its JSON summary. HF_ENDPOINT and STORAGE_EMULATOR_HOST, when set here, are handed to the job
(another Hub endpoint, a storage emulator).
"""

from __future__ import annotations

import hashlib
import json
import shlex
from typing import Mapping, TextIO

from remote.pipeline.claim import from_home
from remote.pipeline.request import PhaseRequest
from remote.pipeline.ship import WORKLOAD_DIR
from remote.ssh import jobs
from remote.ssh.connection import run
from remote.ssh.errors import BadInput
from remote.ssh.secrets import place_secret
from remote.ssh.sync import push_tree
from remote.ssh.wait import NEW_VM_DEADLINE_S, wait_for_ssh
from workload.core.contract import HF_WRITE_TOKEN_SECRET, PUBLISH_ENV
from workload.eval.gate import DEFAULT_MARGIN_POINTS, DEFAULT_MODE
from workload.run.commands import run_name
from workload.run.progress import ProgressPrinter

FORWARDED_ENV = ("HF_ENDPOINT", "STORAGE_EMULATOR_HOST")


def destinations(env: Mapping[str, str]) -> dict:
    try:
        raw = json.loads(env.get(PUBLISH_ENV) or "")
    except json.JSONDecodeError:
        raise BadInput(f'${PUBLISH_ENV} is not JSON: give {{"gcs": …, "hub": …, "public": false}}') from None
    if not isinstance(raw, dict) or not (raw.get("gcs") or raw.get("hub") or raw.get("hubAdapter")):
        raise BadInput(
            f'${PUBLISH_ENV} names no destination: give "gcs" (gs://…), "hub" and/or "hubAdapter" (OWNER/NAME)'
        )
    return raw


def hub_repos(where: dict) -> list[str]:
    """The Hub repos a publish writes to, each as `hf://OWNER/NAME`: the model's, then the adapter's."""
    return [f"hf://{where[key]}" for key in ("hub", "hubAdapter") if where.get(key)]


def publish(request: PhaseRequest, where: dict, out: TextIO, environ: Mapping[str, str]) -> int:
    kept = f"{request.output_dir}/{run_name(request.pipeline)}"
    argv = ["-m", "workload.publish", kept]
    if where.get("gcs"):
        argv += ["--gcs", where["gcs"]]
    if where.get("hub"):
        argv += ["--hub", where["hub"]]
    if where.get("hubAdapter"):
        argv += ["--hub-adapter", where["hubAdapter"]]
    if hub_repos(where) and where.get("public"):
        argv.append("--public")
    # The quality gate (workload/eval/gate.py); a task recorded before the settings existed gets the defaults.
    argv += ["--eval-gate", str(where.get("evalGate", DEFAULT_MODE))]
    argv += ["--eval-margin", f"{float(where.get('evalMargin', DEFAULT_MARGIN_POINTS)):g}"]
    with wait_for_ssh(request.target, deadline_s=NEW_VM_DEADLINE_S) as conn:
        code_dir = f"{request.target.state_dir}/code"
        push_tree(conn, WORKLOAD_DIR, f"{code_dir}/workload")
        if hub_repos(where):
            if not place_secret(conn, HF_WRITE_TOKEN_SECRET, environ.get("HF_WRITE_TOKEN") or None):
                raise BadInput(
                    "no Hub write token on the host and $HF_WRITE_TOKEN is empty: "
                    "pulumi config set --secret tpu-sft:hfWriteToken"
                )
            argv += ["--hf-token-file", f"../secrets/{HF_WRITE_TOKEN_SECRET}"]
        prefix = "publish-" + hashlib.sha256(json.dumps(argv).encode()).hexdigest()[:16]
        listing = run(conn, f"ls -1 -- {shlex.quote(jobs.jobs_root(request.target))} 2>/dev/null; true").stdout.split()
        attempt = 1 + max((int(n.rsplit("-", 1)[1]) for n in listing if n.startswith(prefix + "-")), default=0)
        job_id = f"{prefix}-{attempt}"
        command = f"cd {from_home(code_dir)} && exec {from_home(request.venv)}/bin/python {shlex.join(argv)}"
        env = {"PYTHONUNBUFFERED": "1", **{k: environ[k] for k in FORWARDED_ENV if environ.get(k)}}
        jobs.start(conn, job_id, command, env=env)
        print(
            f"publish: job {job_id} on {request.target.host}: {kept} → "
            f"{', '.join([*([where['gcs']] if where.get('gcs') else []), *hub_repos(where)])}",
            file=out,
            flush=True,
        )
        printer = ProgressPrinter(out)
        code = jobs.follow(request.target, job_id, printer.line, conn=conn)
    summary = printer.summary or {"event": "summary", "ok": False, "error": "the publish job printed no summary"}
    for destination, result in (summary.get("published") or {}).items():
        done = (
            "already there, nothing sent"
            if result["unchanged"]
            else (f"{len(result['uploaded'])} file(s) sent, {result['skipped']} already there")
        )
        print(f"✓ published to {destination}: {done}", file=out, flush=True)
    verdict = summary.get("gate") or {}
    if summary.get("ok") and verdict.get("line"):
        mark = "⚠" if verdict.get("found") else "·" if verdict.get("mode") == "off" else "✓"
        print(f"{mark} {verdict['line']}", file=out, flush=True)
    if summary.get("error"):
        print(f"✗ publish: {summary['error']}", file=out, flush=True)
    print(json.dumps(summary), file=out, flush=True)
    return code
