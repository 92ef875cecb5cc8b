"""The run and its log: on the host, the run's latest attempt under its jobs dir (`run-N`, workload/core/contract.py;
the host's other jobs, bootstrap's and publish's, are not the run); and when the host is gone, the copy the run
kept of its log beside its checkpoints (workload/run/log_mirror.py).
"""

from __future__ import annotations

import shlex

from remote.pipeline.claim import highest_attempt
from remote.ssh import jobs
from remote.ssh.connection import Connection, run
from remote.stack.gcs import Gcs
from workload.core.contract import run_job_id
from workload.run import log_mirror
from workload.run.steps import ORBAX_COMMIT_FILE

LOG_BYTES = 1 << 20  # a run's events are a few hundred lines (workload/run/events.py): the whole log


def latest_job(conn: Connection) -> str | None:
    """The job of the run's latest attempt, None if the host has none."""
    number = highest_attempt(conn)
    return None if number is None else run_job_id(number)


def job_log(conn: Connection, job_id: str) -> list[str]:
    """The job's log lines (its last LOG_BYTES)."""
    path = shlex.quote(jobs.log_path(conn.target, job_id))
    return run(conn, f"tail -c {LOG_BYTES} {path} 2>/dev/null; true").stdout.splitlines()


def bucket_log(gcs: Gcs, runs_url: str) -> tuple[str, list[str]] | None:
    """The copy of the run's log started last, under `runs_url` (<runs>/<model>/post-train/<run>/run-log/), and
    its lines; None if there is none."""
    found: list[tuple[str, str]] = []
    _, models = gcs.listing(runs_url)
    for model in models:
        _, names = gcs.listing(f"{runs_url}/{model}/post-train")
        for name in names:
            log_dir = f"{runs_url}/{model}/post-train/{name}/{log_mirror.LOG_DIR}"
            objects, _ = gcs.listing(log_dir)
            found += [(o, f"{log_dir}/{o}") for o in objects if o.endswith(log_mirror.LOG_SUFFIX)]
    if not found:
        return None
    _, url = max(found)  # named by when the runner started: the latest sorts last
    data = gcs.read(url) or b""
    return url, data.decode("utf-8", "replace").splitlines()


def last_checkpoint(gcs: Gcs, log_url: str) -> int | None:
    """The highest checkpoint the run finished beside its log's copy at `log_url` (`<run dir>/checkpoints/<step>`,
    whose `commit_success.txt` orbax writes last on Cloud Storage: workload/run/steps.py `latest_checkpoint`), as the
    trainer numbers it; None if there is none yet."""
    checkpoints = f"{log_url.rsplit(f'/{log_mirror.LOG_DIR}/', 1)[0]}/checkpoints"
    _, steps = gcs.listing(checkpoints)
    done = [int(s) for s in steps if s.isdigit() and gcs.read(f"{checkpoints}/{s}/{ORBAX_COMMIT_FILE}") is not None]
    return max(done, default=None)
