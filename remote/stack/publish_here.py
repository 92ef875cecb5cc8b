"""`scripts/tpu-sft publish`: the kept model published from the checkpoint bucket, by this machine, with no VM.

The `…-publish` task of `pulumi up` publishes from the VM, which a stack whose VM autostop deleted would have to make
again (a TPU VM, billed; none at all once a reservation has ended). The kept model is in the bucket
(gs://<bucket>/kept/<run>/, where a slice keeps it and a VM copies its data disk's: remote/stack/model.py
`kept_in_bucket`), so this runs the same entry the task runs on the VM, `python -m workload.publish`, here, on that
URL: it copies the model to a staging folder, checks every file against the kept manifest, passes it through the eval
gate and lays it out as a repo, exactly as on the VM. Here, in a Python that has the publish's libraries
(huggingface_hub, google-cloud-storage, gcsfs): $TPU_SFT_PUBLISH_PYTHON, else .maxtext-venv's (scripts/maxtext-venv).

Who publishes is whoever runs it: Cloud Storage is written with this machine's Application Default Credentials
(`gcloud auth application-default login`), the Hub with $HF_WRITE_TOKEN, handed to the child as HF_TOKEN in its
environment, never in argv or output. The upload goes out through this machine's uplink: the model is read from the
bucket and sent on, so its size crosses the link twice; the line printed first says how long that takes at 100 Mbit/s
(a home uplink's order), the last how long it took.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping

from remote.ssh.errors import EXIT_BAD_INPUT, RemoteError
from remote.stack.gcs import Gcs
from remote.stack.model import kept_in_bucket, kept_size
from remote.stack.outputs import StackOutputs

PYTHON_ENV = "TPU_SFT_PUBLISH_PYTHON"
REFERENCE_MBIT_S = 100


class PublishError(RemoteError):
    exit_code = EXIT_BAD_INPUT


def publish_python(root: Path, environ: Mapping[str, str]) -> str:
    """A Python with the publish's libraries: $TPU_SFT_PUBLISH_PYTHON, else .maxtext-venv's."""
    given = environ.get(PYTHON_ENV)
    python = given or str(root / ".maxtext-venv" / "bin" / "python")
    if not os.access(python, os.X_OK):
        raise PublishError(
            f"no Python to publish with at {python}: run scripts/maxtext-venv, or set ${PYTHON_ENV} to a Python "
            "that has huggingface_hub, google-cloud-storage and gcsfs"
        )
    return python


def transfer_line(size_bytes: int, mbit_s: float = REFERENCE_MBIT_S) -> str:
    """How long the model's bytes take through this machine: read from the bucket, then sent on."""
    gb = size_bytes / 1e9
    minutes = 2 * size_bytes * 8 / (mbit_s * 1e6) / 60
    return f"{gb:.1f} GB through this machine, in and out: ~{minutes:.0f} min at {mbit_s:.0f} Mbit/s"


def argv_for(
    model_url: str,
    hub: str | None,
    hub_adapter: str | None,
    gcs_uri: str | None,
    public: bool,
    gate: tuple[str, float] | None = None,
) -> list[str]:
    argv = ["-m", "workload.publish", model_url]
    for flag, value in (("--gcs", gcs_uri), ("--hub", hub), ("--hub-adapter", hub_adapter)):
        if value:
            argv += [flag, value]
    if gate is not None:  # the stack's evalGate and evalMargin (workload/eval/gate.py); else the gate's defaults
        argv += ["--eval-gate", gate[0], "--eval-margin", f"{gate[1]:g}"]
    return argv + (["--public"] if public and (hub or hub_adapter) else [])


@dataclass(frozen=True)
class Destinations:
    hub: str | None = None
    hub_adapter: str | None = None
    gcs_uri: str | None = None
    public: bool = False
    gate: tuple[str, float] | None = None  # (evalGate, evalMargin); None: the gate's defaults


def publish_from_bucket(
    outputs: StackOutputs,
    gcs: Gcs,
    where: Destinations,
    *,
    root: Path,
    environ: Mapping[str, str],
) -> int:
    """`scripts/tpu-sft publish`: the kept model the stack's outputs lead to in its bucket."""
    _check(where, environ.get("HF_WRITE_TOKEN"))
    python = publish_python(root, environ)
    model_url, size = kept_in_bucket(outputs, gcs)
    return publish_kept(model_url, size, where, python=python, root=root, environ=environ)


def publish_kept_url(
    model_url: str, gcs: Gcs, where: Destinations, *, write_token: str | None, root: Path, environ: Mapping[str, str]
) -> int:
    """The `…-publish-from-bucket` task of `pulumi up` (infra/resources/bucket_publish.py), which names the kept
    model's URL itself: the stack's outputs are being written while it runs. The write token comes from its stdin
    (the stack's secret tpu-sft:hfWriteToken), else $HF_WRITE_TOKEN."""
    token = write_token or environ.get("HF_WRITE_TOKEN")
    _check(where, token)
    python = publish_python(root, environ)
    size = kept_size(gcs, model_url)
    return publish_kept(
        model_url, size, where, python=python, root=root, environ={**environ, "HF_WRITE_TOKEN": token or ""}
    )


def _check(where: Destinations, write_token: str | None) -> None:
    if not (where.hub or where.hub_adapter or where.gcs_uri):
        raise PublishError("nothing to publish to: give --hub OWNER/NAME, --hub-adapter OWNER/NAME and/or --gcs gs://…")
    if (where.hub or where.hub_adapter) and not write_token:
        raise PublishError(
            "the Hub needs a write token: export HF_WRITE_TOKEN (one with write access), or pulumi config set "
            "--secret tpu-sft:hfWriteToken, and run again"
        )


def publish_kept(
    model_url: str, size: int, where: Destinations, *, python: str, root: Path, environ: Mapping[str, str]
) -> int:
    print(f"publish: {model_url} → from this machine, no VM: {transfer_line(size)}", flush=True)
    env = {**environ, "PYTHONPATH": str(root), "PYTHONUNBUFFERED": "1"}
    env.pop("HF_WRITE_TOKEN", None)
    if where.hub or where.hub_adapter:
        env["HF_TOKEN"] = environ["HF_WRITE_TOKEN"]
    started = time.monotonic()
    done = subprocess.run(
        [python, *argv_for(model_url, where.hub, where.hub_adapter, where.gcs_uri, where.public, where.gate)],
        cwd=root,
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    )
    lines = done.stdout.splitlines()
    summary = _summary(lines[-1] if lines else "")
    for line in lines[:-1]:
        print(line, flush=True)
    if summary is None:
        sys.stdout.write(lines[-1] + "\n" if lines else "")
        return done.returncode or 1
    if not summary.get("ok"):
        print(f"✗ publish: {summary.get('error', 'failed')}", flush=True)
        print(json.dumps(summary), flush=True)
        return done.returncode or 1
    for destination, result in (summary.get("published") or {}).items():
        sent = len(result.get("uploaded", []))
        said = "already there, nothing sent" if result.get("unchanged") else f"{sent} file(s) sent"
        print(f"✓ published to {destination}: {said}", flush=True)
    verdict = summary.get("gate") or {}
    if verdict.get("line"):
        print(f"{'⚠' if verdict.get('found') else '·' if verdict.get('mode') == 'off' else '✓'} {verdict['line']}")
    print(f"publish: done in {time.monotonic() - started:.0f} s", flush=True)
    print(json.dumps(summary), flush=True)  # last, as the VM's task prints it: the `published` output reads it
    return 0


def _summary(line: str) -> dict | None:
    try:
        parsed = json.loads(line)
    except ValueError:
        return None
    return parsed if isinstance(parsed, dict) and parsed.get("event") == "summary" else None
