"""Run by the MaxText venv's Python: MaxText 0.2.3's unscanned NNX decoder (the small gemma3 of two layers) with a
QLoRA adapter, placed over four CPU devices as train_sft places it (`lora_utils.apply_lora_to_model` given the
mesh, outside it), then called twice under the mesh. Prints JSON: what a quantised kernel is after qwix's call, its
scale's shape and sharding, the mesh's fsdp, and the calls' logits' shapes; or, where a step stopped, which and why.
`python quantised_mesh_live.py QTYPE` (int8, nf4), with `--unpatched` to leave workload/launch/quantised_base.py's
unnesting out (what the test checks fails without it)."""

import os
import sys

os.environ["JAX_PLATFORMS"] = "cpu"
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=4"

import json  # noqa: E402

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import maxtext.trainers.post_train.sft.train_sft as train_sft  # noqa: E402
from flax import linen as nn  # noqa: E402
from maxtext.common.common_types import MODEL_MODE_TRAIN  # noqa: E402
from maxtext.configs import pyconfig  # noqa: E402
from maxtext.utils import lora_utils, maxtext_utils, maxtext_utils_nnx, model_creation_utils  # noqa: E402

from workload.core.config import PipelineConfig  # noqa: E402
from workload.launch import quantised_base  # noqa: E402
from workload.tiny import assets as tiny  # noqa: E402

SEQUENCES, LENGTH = 4, 32


def main(qtype: str, unpatched: bool) -> dict:
    adapter = PipelineConfig.from_mapping({"trainer": "tunix", "tuning": "qlora", "loraWeightQtype": qtype}).adapter
    assert adapter is not None
    argv, taken = quantised_base.take(
        [
            train_sft.__file__,
            *(o for o in tiny.maxtext_overrides() if not o.startswith("base_num_decoder_layers=")),
            "base_num_decoder_layers=2",
            *adapter.maxtext_options(),
            "scan_layers=false",
            f"max_target_length={LENGTH}",
            "per_device_batch_size=1",
            "run_name=quantised-mesh",
            "base_output_directory=/tmp/quantised-mesh",
            "hardware=cpu",
            "attention=dot_product",
            "skip_jax_distributed_system=true",
        ]
    )
    if unpatched:
        quantised_base._unnest_what_an_unscanned_layer_nests = lambda quantised: None  # the rest of the patch stays
    quantised_base.patch(str(taken))
    config = pyconfig.initialize_pydantic(argv)
    mesh = maxtext_utils.get_mesh_from_config(config)
    said: dict = {"fsdp": mesh.shape["fsdp"]}
    rngs = maxtext_utils_nnx.create_nnx_rngs(config, model_mode=MODEL_MODE_TRAIN)
    model = model_creation_utils.from_config(config, mesh=mesh, rngs=rngs, model_mode=MODEL_MODE_TRAIN)
    try:
        model = lora_utils.apply_lora_to_model(model, mesh, config)
    except Exception as error:  # noqa: BLE001 — what stopped the placement is the finding
        return {**said, "stopped": "placement", "error": f"{type(error).__name__}: {str(error)[-300:]}"}
    kernel = vars(model.decoder.layers[0].mlp.wo)["kernel"]
    said["kernel"] = type(kernel).__name__
    scale = kernel.array.scale.get_value()
    said["scale"] = {"shape": list(scale.shape), "spec": [str(axis) for axis in scale.sharding.spec]}
    tokens = jnp.ones((SEQUENCES, LENGTH), jnp.int32)
    positions = jnp.broadcast_to(jnp.arange(LENGTH)[None], (SEQUENCES, LENGTH))
    said["calls"] = []
    with jax.set_mesh(mesh), nn.logical_axis_rules(config.logical_axis_rules):
        for _ in range(2):
            try:
                logits = model(tokens, positions, decoder_segment_ids=jnp.ones_like(tokens), enable_dropout=False)
            except Exception as error:  # noqa: BLE001
                return {**said, "stopped": "call", "error": f"{type(error).__name__}: {str(error)[-300:]}"}
            said["calls"].append(list(logits.shape))
    return said


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1], "--unpatched" in sys.argv[2:])))
