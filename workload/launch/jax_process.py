"""This host's process in the JAX job: its worker id and every worker's hostname in worker-id order, as the
remote layer gives them (`--worker-id`, `--worker-hostnames`; worker 0's host is the JAX coordinator's). One
host, the default: worker 0 of one. The process ids are the worker ids, set explicitly here (the cluster
variables below) rather than detected from the metadata server; on a slice those ids are the platform's own, which
the remote layer read from each host's metadata (`tpu-env`, remote/pipeline/worker_order.py), so both agree.

Which steps each worker runs on a slice, and why: ARCHITECTURE.md, "One VM or a slice".
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from workload.core.config import ConfigError

_HOSTNAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9.-]{0,252}")  # a DNS name or an IPv4 address
# MaxText's CPU path dials the coordinator on this port (max_utils.initialize_jax_for_cpu, "used in XPK").
CPU_COORDINATOR_PORT = 1234


@dataclass(frozen=True)
class JaxProcess:
    id: int = 0
    hostnames: tuple[str, ...] = ("localhost",)

    @property
    def count(self) -> int:
        return len(self.hostnames)

    @property
    def multi_host(self) -> bool:
        return self.count > 1

    @property
    def leader(self) -> bool:
        """Worker 0: JAX process 0, and the one worker that exports, verifies and keeps."""
        return self.id == 0

    def tpu_env(self) -> dict[str, str]:
        """JAX's own TPU cluster variables (its GKE-style detection reads them when TPU_SKIP_MDS_QUERY is set):
        the process id, the process count and the coordinator (the first hostname) come from these, not from
        the metadata server."""
        return {"TPU_WORKER_ID": str(self.id), "TPU_WORKER_HOSTNAMES": ",".join(self.hostnames)}

    def cpu_env(self) -> dict[str, str]:
        """MaxText's multi-process CPU path (hardware=cpu without skip_jax_distributed_system): process id =
        JOB_INDEX × PROCESSES_IN_JOB + JOB_COMPLETION_INDEX, coordinator JAX_COORDINATOR_ADDRESS:1234, gloo."""
        return {
            "JAX_COORDINATOR_ADDRESS": self.hostnames[0],
            "JOB_INDEX": "0",
            "JOB_COMPLETION_INDEX": str(self.id),
            "PROCESSES_IN_JOB": str(self.count),
            "JAX_PROCESS_COUNT": str(self.count),
        }

    @classmethod
    def from_flags(cls, worker_id: int | None, hostnames: str | None) -> "JaxProcess":
        if worker_id is None and hostnames is None:
            return cls()
        if worker_id is None or hostnames is None:
            raise ConfigError(
                "--worker-id/--worker-hostnames",
                "one is given without the other",
                "give both (a multi-host slice) or neither (one host)",
            )
        names = tuple(hostnames.split(","))
        bad = next((n for n in names if not _HOSTNAME.fullmatch(n)), None)
        if bad is not None:
            raise ConfigError(
                "--worker-hostnames",
                f"{bad!r} is not a hostname",
                "give the workers' hostnames in worker-id order, comma-separated",
            )
        if len(set(names)) != len(names):
            raise ConfigError("--worker-hostnames", "lists a host twice", "list each worker's hostname once")
        if not 0 <= worker_id < len(names):
            raise ConfigError(
                "--worker-id",
                f"{worker_id} is not a worker of {len(names)}",
                f"give 0 to {len(names) - 1}, this host's place in --worker-hostnames",
            )
        return cls(worker_id, names)


ONE_HOST = JaxProcess()  # every single-host VM, and the default
