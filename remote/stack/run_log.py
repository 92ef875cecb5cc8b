"""The run and its log: on the host, the job started last under its jobs dir (remote/ssh/jobs.py), whatever its
name; and when the host is gone, the copy the run kept of its log beside its checkpoints (workload/run/log_mirror.py).
"""

from __future__ import annotations

import shlex

from remote.ssh import jobs
from remote.ssh.connection import Connection, run
from remote.stack.gcs import Gcs
from workload.run import log_mirror

LOG_BYTES = 1 << 20  # a run's events are a few hundred lines (workload/run/events.py): the whole log


def latest_job(conn: Connection) -> str | None:
    """The job started last: each job's wrapper writes `boot_id` once, as it starts (remote/ssh/jobs.py)."""
    root = shlex.quote(jobs.jobs_root(conn.target))
    out = run(
        conn,
        f"find {root} -mindepth 2 -maxdepth 2 -name boot_id -printf '%T@ %h\\n' 2>/dev/null | sort -n | tail -n 1",
    ).stdout.strip()
    return out.split(" ", 1)[1].rsplit("/", 1)[1] if out else None


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
