"""A slice's worker order as the platform numbers it: each host's `TPU_WORKER_ID`, read on the host itself from the
`tpu-env` attribute of its instance metadata, before any worker's job starts.

Why not the target's order: the target lists the group's hosts by instance name (infra/resources/slice.py `host_names`),
a guess at the platform's numbering; libtpu forms the slice by the platform's own ids, so `--worker-id` and
`--worker-hostnames` must follow them (ARCHITECTURE.md, "One VM or a slice").

Where the shape comes from: field reports of v6e/TPU7x slices made as managed instance groups on Compute Engine
(2025–2026), not Google's text: every group host carries `tpu-env`, lines of `KEY: 'value'` like the TPU API's own,
among them `TPU_WORKER_ID`, `TOPOLOGY` and `HOST_BOUNDS`. The lines are read as jax 0.9.2 reads the same attribute
(`jax/_src/clusters/cloud_tpu_cluster.py` `get_tpu_env_value_from_metadata`: split at the first `:`, strip spaces
and single quotes), so this module and jax cannot read one `tpu-env` two ways.

Every failure is one line naming the host(s) and what to check; nothing is started on a slice whose order is not
a whole, unrepeated 0…N-1.
"""

from __future__ import annotations

import math
import shlex
from typing import Sequence

from remote.ssh.connection import Connection, run
from remote.ssh.errors import EXIT_FAILED, RemoteError
from remote.ssh.hosts import WorkerHost, on_every

METADATA_HOST = "metadata.google.internal"
TPU_ENV_PATH = "/computeMetadata/v1/instance/attributes/tpu-env"
# What to check when the platform's numbering and the target disagree; said once, at the end of every such error.
CHECK = (
    "Fix: compare each host's tpu-env (gcloud compute instances describe HOST --format='value(metadata.items)') "
    "with the group's hosts (gcloud compute instance-groups managed list-instances GROUP); a host the group made "
    "outside the slice needs recreating"
)


class WorkerOrderError(RemoteError):
    """The hosts' metadata gives no whole worker order; one line naming the host(s) and what to check."""

    exit_code = EXIT_FAILED


def read_command() -> str:
    """The shell command that prints the host's `tpu-env` and, on a last line of its own, the HTTP status.

    curl is what bootstrap already runs on every host (remote/pipeline/bootstrap/seed.py `download_and_run`), so it
    needs nothing new. GCE_METADATA_HOST (host[:port]) is the override Google's client libraries honour and
    autostop's test hook (workload/spend/autostop.py); a VM sets none. No --fail: a 404 (no such attribute) must
    reach the reader as a status, not as curl's exit code."""
    url = f"http://${{GCE_METADATA_HOST:-{METADATA_HOST}}}{TPU_ENV_PATH}"
    return (
        "curl --silent --show-error --connect-timeout 5 --max-time 30 --retry 3 "
        f"--header {shlex.quote('Metadata-Flavor: Google')} --write-out '\\n%{{http_code}}' \"{url}\""
    )


def tpu_env_of(host: str, printed: str) -> str:
    """`tpu-env`'s text from what `read_command` printed on `host`, or the one-line reason there is none."""
    body, _, status = printed.rpartition("\n")
    if status.strip() == "404":
        raise WorkerOrderError(
            f"{host}: its instance metadata has no tpu-env, so its TPU worker id is unknown. Fix: target only the "
            "hosts of a TPU slice's managed instance group (tpu-sft:acceleratorType v6e-16 or larger)"
        )
    if status.strip() != "200":
        raise WorkerOrderError(
            f"{host}: the metadata server answered HTTP {status.strip() or '(none)'} for tpu-env. Fix: run the phase "
            "again; if it persists, the host's metadata server is broken: recreate the host"
        )
    return body


def tpu_env_value(text: str, key: str) -> str | None:
    """One key's value in `tpu-env`, read as jax reads it (the module's docstring); the last line with it wins."""
    value = None
    for line in text.split("\n"):
        if ":" in line:
            row_key, row_value = line.split(":", 1)
            if row_key.strip() == key:
                value = row_value.strip().strip("'")
    return value


def worker_id_of(host: str, text: str) -> int:
    raw = tpu_env_value(text, "TPU_WORKER_ID")
    if raw is None:
        raise WorkerOrderError(f"{host}: its tpu-env has no TPU_WORKER_ID. {CHECK}")
    if not (raw.isascii() and raw.isdigit()):
        raise WorkerOrderError(f"{host}: its tpu-env's TPU_WORKER_ID is {raw!r}, not a whole number. {CHECK}")
    return int(raw)


def slice_size(host: str, text: str) -> int | None:
    """The slice's number of hosts as `HOST_BOUNDS` (x,y,z hosts) says it, where the host's tpu-env has one."""
    raw = tpu_env_value(text, "HOST_BOUNDS")
    if raw is None:
        return None
    parts = raw.split(",")
    if not all(p.strip().isascii() and p.strip().isdigit() for p in parts):
        raise WorkerOrderError(f"{host}: its tpu-env's HOST_BOUNDS is {raw!r}, not whole numbers. {CHECK}")
    return math.prod(int(p) for p in parts)


def ordered(hosts: Sequence[str], tpu_envs: Sequence[str]) -> tuple[WorkerHost, ...]:
    """The hosts as workers numbered by their own `TPU_WORKER_ID`, in worker order: 0…N-1 once each, N the number
    of hosts (and the size `HOST_BOUNDS` gives, where given)."""
    count = len(hosts)
    ids = [worker_id_of(host, text) for host, text in zip(hosts, tpu_envs, strict=True)]
    for host, text in zip(hosts, tpu_envs, strict=True):
        size = slice_size(host, text)
        if size is not None and size != count:
            raise WorkerOrderError(
                f"{host}: its tpu-env's HOST_BOUNDS make a slice of {size} hosts, but the target lists {count}. {CHECK}"
            )
    for host, worker_id in zip(hosts, ids, strict=True):
        if worker_id >= count:
            raise WorkerOrderError(
                f"{host}: its tpu-env's TPU_WORKER_ID {worker_id} is not a worker of the {count} hosts the target "
                f"lists (0 to {count - 1}). {CHECK}"
            )
    holders: dict[int, str] = {}
    for host, worker_id in zip(hosts, ids, strict=True):
        if worker_id in holders:
            raise WorkerOrderError(
                f"{holders[worker_id]} and {host}: both have TPU_WORKER_ID {worker_id} in their tpu-env. {CHECK}"
            )
        holders[worker_id] = host
    # N ids, each in 0…N-1, none repeated: every id is there once.
    return tuple(WorkerHost(worker_id, holders[worker_id]) for worker_id in range(count))


def by_metadata(
    placed: Sequence[WorkerHost], conns: Sequence[Connection]
) -> tuple[tuple[WorkerHost, ...], list[Connection]]:
    """The workers in the platform's order, and their connections in that order (`conns[i]` is `placed[i]`'s).

    Every host is asked at once; the first host (in the target's order) whose answer cannot be read is the error."""
    printed = on_every(placed, lambda w: _read(conns[w.id], w.host))
    failure = next((o for o in printed if isinstance(o, RemoteError)), None)
    if failure is not None:
        raise failure
    hosts = [w.host for w in placed]
    texts = [tpu_env_of(host, str(out)) for host, out in zip(hosts, printed, strict=True)]
    workers = ordered(hosts, texts)
    by_host = {w.host: conns[w.id] for w in placed}
    return workers, [by_host[w.host] for w in workers]


def _read(conn: Connection, host: str) -> str:
    result = run(conn, read_command(), warn=True)
    if result.exited == 127:
        raise WorkerOrderError(f"{host}: has no curl to ask its metadata server with. Fix: apt-get install curl there")
    if result.exited != 0:
        # curl's own line (e.g. "Could not resolve host"); it holds a URL, never a secret.
        said = next(iter(result.stderr.strip().splitlines()[-1:]), f"curl exited {result.exited}")
        raise WorkerOrderError(
            f"{host}: the metadata server did not answer ({said}). Fix: run the phase again; a Compute Engine "
            "host always has one, so if it persists, recreate the host"
        )
    return str(result.stdout)
