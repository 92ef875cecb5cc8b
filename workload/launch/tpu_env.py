"""The environment each MaxText subprocess runs in: the TPU runtime variables of seed step 5, derived from
the accelerator table, and the Hugging Face cache on fast scratch. Pure: no process state is read except
what is passed in.

The HF token is deliberately absent: the runner adds `HF_TOKEN_PATH`, the path of a 0600 file holding it, to
the child's environment only at the moment it starts it (workload/launch/hf_token.py), so the token never appears in
printed commands, argv or logs.
"""

from __future__ import annotations

from workload.core.accelerators import ACCELERATORS
from workload.launch import data_in_process
from workload.launch.jax_process import ONE_HOST, JaxProcess


def tpu_env(accelerator_type: str, hostname: str, worker: JaxProcess = ONE_HOST) -> dict[str, str]:
    """Seed step 5's exports; on one host, worker 0 on localhost, as the seed has them."""
    accelerator = ACCELERATORS[accelerator_type]
    if accelerator.hosts != worker.count:
        raise ValueError(f"{accelerator_type} has {accelerator.hosts} host(s), but {worker.count} worker(s) were given")
    cluster = worker.tpu_env()
    return {
        "TPU_ACCELERATOR_TYPE": accelerator.name,
        "TPU_WORKER_ID": cluster["TPU_WORKER_ID"],
        "TPU_NAME": hostname,
        # Kept on a slice: jax then forms its cluster from TPU_WORKER_ID/TPU_WORKER_HOSTNAMES, which are the
        # platform's own ids (each host's tpu-env, read by remote/pipeline/worker_order.py), so they agree with the
        # metadata; without it jax tries its GCE-style cluster, which would parse the hosts' worker-network-endpoints
        # (bare instance names, in field reports) as `…:…:address` (ARCHITECTURE.md, "One VM or a slice").
        "TPU_SKIP_MDS_QUERY": "1",
        "TPU_WORKER_HOSTNAMES": cluster["TPU_WORKER_HOSTNAMES"],
        "TPU_TOPOLOGY": accelerator.topology,
        "TPU_CHIPS_PER_HOST_BOUNDS": ",".join(map(str, accelerator.chips_per_host_bounds)),
        "TPU_HOST_BOUNDS": ",".join(map(str, accelerator.host_bounds)),
    }


def hf_env(hf_home: str) -> dict[str, str]:
    """Conversion of gemma3-4b can fill the boot disk through the HF cache; keep it on scratch."""
    return {"HF_HOME": hf_home}


def cpu_env() -> dict[str, str]:
    """The tiny profile: CPU JAX (libtpu is installed and would otherwise be probed), no hub access, so a missing
    local file fails at once instead of waiting on the network, and one torch thread. The tiny profile always
    shares its cores (a slice's simulated hosts, the suite's runs side by side), and torch's OpenMP threads spin at
    every barrier while another process holds the core: the before/after answers took 100-112 s of CPU beside five
    busy processes on 2 cores, 18 s with one thread (bench/torch_threads.py). The trainer reads its rows in its own
    process (workload/launch/data_in_process.py)."""
    return {
        "JAX_PLATFORMS": "cpu",
        "HF_HUB_OFFLINE": "1",
        "HF_DATASETS_OFFLINE": "1",
        "OMP_NUM_THREADS": "1",
        data_in_process.ENV: "1",
    }
