"""What one SFT checkpoint of Gemma 3 4B costs to write: its size, and the time and TPU money per checkpoint on the
data disk versus a Cloud Storage bucket. Every figure is computed here from the formula next to it.

    .venv/bin/python -m bench.checkpoint_cost

Size. MaxText 0.2.2's train_sft saves through Tunix 0.1.7's CheckpointManager (the Tunix workload/core/lock.py
pins), which saves `nnx.state(model)` under `model_params` and the optimizer's state under `optimizer_state`, and
no data-iterator position. The parameters are stored in `weight_dtype`, float32 by default (configs/base.yml),
4 bytes each, and so are Adam's mu and nu (`mu_dtype` unset: the parameters' dtype). The optimizer state also
holds optax.MultiSteps' gradient accumulator, float32 too, but all zeros at every checkpoint when
`gradient_accumulation_steps` is 1 (a checkpoint follows a finished update), and orbax compresses it to almost
nothing: so three float32 copies of the parameters. The text decoder's parameter count follows from
configs/models/gemma3-4b.yml (the vision tower is not built with use_multimodal=False), as workload/core/models.py
`parameter_count` computes it for the cost outputs:

    embedding    vocab × emb
    per layer    q: emb × heads × head_dim, k and v: emb × kv_heads × head_dim each, o: heads × head_dim × emb,
                 MLP (gate, up, down): 3 × emb × mlp, norms: 4 × emb (pre/post attention and MLP) + 2 × head_dim
                 (query and key norms)
    final norm   emb

The same formula gives the tiny test model's count (17,000,192 parameters, 68,000,768 bytes): orbax read its
converted checkpoint as 64.9 MiB (= 68.0 MB); a checkpoint of its SFT run (4 December, Tunix 0.1.7, step 3)
stored 62,892,454 bytes of parameters and 125,194,666 bytes of optimizer state (0.925 and 0.920 of one and two
float32 copies: orbax compresses a little), so the formula is an upper bound; tests/workload/test_tiny_pipeline.py
checks both bounds on every run.

Throughput. Hyperdisk Balanced includes 140 MiB/s at no extra charge and can be provisioned up to 2,400 MiB/s per
volume (cloud.google.com/compute/docs/disks/hd-types/hyperdisk-balanced); the data disk here is created without
provisioned throughput. Cloud Storage publishes no per-client write rate: writes across objects have no limit and
a bucket starts at about 1,000 object writes per second (cloud.google.com/storage/quotas); one v6e host has 4 ×
200 Gbps NICs (cloud.google.com/tpu/docs/v6e). With ocdbt's 2 GiB target file size
(checkpoint_storage_target_data_file_size_bytes) a 4B checkpoint is a handful of objects, far from that limit.
The NIC line rate is an upper bound, not a measurement.
"""

from __future__ import annotations

import json

from infra.pricing.cost import checkpoints_per_run
from workload.core.models import MODELS, parameter_count

GEMMA3_4B = MODELS["gemma3-4b"].shape  # configs/models/gemma3-4b.yml in MaxText 0.2.2

FLOAT32_BYTES = 4
FLOAT32_COPIES = 3  # the parameters, Adam's mu and nu (the accumulator's zeros compress away)
MIB = 1024 * 1024
DISK_BASELINE_MIB_S = 140  # Hyperdisk Balanced, included
DISK_MAX_MIB_S = 2400  # Hyperdisk Balanced, per volume, provisioned at extra cost
HOST_NIC_BITS_S = 4 * 200e9  # v6e host
CHECKPOINT_PERIOD = 63  # Pulumi.dev.yaml: the seed's tokens in 250 steps of batch 4, as 250 of 1,000 steps at batch 1
STEPS = 250
TPU_USD_PER_HOUR = 8 * 2.70  # v6e-8 at $2.70 per chip-hour (Pulumi.dev.yaml pricePerChipHour)


def figures() -> dict[str, float]:
    params = parameter_count(GEMMA3_4B)
    size = params * FLOAT32_BYTES * FLOAT32_COPIES
    checkpoints = checkpoints_per_run(STEPS, CHECKPOINT_PERIOD)
    disk_s = size / (DISK_BASELINE_MIB_S * MIB)
    disk_max_s = size / (DISK_MAX_MIB_S * MIB)
    nic_s = size * 8 / HOST_NIC_BITS_S
    usd_per_s = TPU_USD_PER_HOUR / 3600
    return {
        "parameters": params,
        "parameter_bytes": params * FLOAT32_BYTES,
        "checkpoint_bytes": size,
        "checkpoint_gb": round(size / 1e9, 2),
        "checkpoint_gib": round(size / 2**30, 2),
        "checkpoints_per_run": checkpoints,
        "disk_baseline_s": round(disk_s, 1),
        "disk_max_provisioned_s": round(disk_max_s, 1),
        "gcs_nic_bound_s": round(nic_s, 2),
        "tpu_usd_if_training_waits_disk_baseline": round(disk_s * usd_per_s, 2),
        "tpu_usd_per_run_if_training_waits_disk_baseline": round(checkpoints * disk_s * usd_per_s, 2),
        "all_checkpoints_gb": round(checkpoints * size / 1e9, 1),
    }


if __name__ == "__main__":
    print(json.dumps(figures(), indent=1))
