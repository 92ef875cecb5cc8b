"""Runs MaxText's `to_huggingface` on a LoRA checkpoint of Tunix's loop, which MaxText 0.2.3 refuses to read.

to_huggingface's adapter mode (`lora.lora_restore_path` without `load_parameters_path`) turns each
`…-kernel_lora_a`/`_lora_b` pair into PEFT's `lora_A`/`lora_B` (`_transform_weights_to_adapter`: transposed, one
per layer of a scanned block, which is all Gemma 3's `reshape_kernel` hook does to a kernel). But before it gets
there, `main` checks the checkpoint's keys against the parameter map with the `_lora_a`/`_lora_b` keys still in
(it adds their base keys beside them), and `validate_and_filter_param_map_keys` stops at them: "maxtext_state_dict
must be a subset of flattened param_map". This checks the keys the pairs stand for, as 0.2.3 meant to; the guard
(workload/launch/pinned_code.py) holds the patch to the function it was read in.

    python -m workload.launch.lora_export ARGS...     (to_huggingface's own arguments)
"""

from __future__ import annotations

import functools
import runpy
import sys

from workload.launch import pinned_code

PATCH = "workload/launch/lora_export.py"
TO_HUGGINGFACE = "maxtext.checkpoint_conversion.to_huggingface"
# sha256 of maxtext 0.2.3's checkpoint_conversion/utils/utils.py validate_and_filter_param_map_keys, and of its
# save_adapter_files, which writes `weights` with safetensors.numpy.save_file as they come.
VALIDATE_SHA256 = "9a86e95464936fb3976bffb961bc12aaaa7b0c191f42d90e1a1c5f8cb8338be6"
SAVE_ADAPTER_SHA256 = "a040ff7218ebfb3b46fbad76b7a0cf45efefeb673b414f2ec6f6a5c4138e5ca8"
LORA_SUFFIXES = ("_lora_a", "_lora_b")


def patch() -> None:
    # to_huggingface imports both functions by name when it runs: the module's attributes are what it gets.
    import numpy as np
    from maxtext.checkpoint_conversion.utils import utils

    validate = pinned_code.check(utils, "validate_and_filter_param_map_keys", "maxtext", VALIDATE_SHA256, PATCH)
    save_adapter_files = pinned_code.check(utils, "save_adapter_files", "maxtext", SAVE_ADAPTER_SHA256, PATCH)

    @functools.wraps(validate)
    def validate_the_keys_lora_pairs_stand_for(param_map_keys, maxtext_state_keys):
        return validate(param_map_keys, {k for k in maxtext_state_keys if not k.endswith(LORA_SUFFIXES)})

    @functools.wraps(save_adapter_files)
    def save_numpy_adapter_files(output_dir, weights, *args, **kwargs):
        return save_adapter_files(output_dir, {k: np.asarray(v) for k, v in weights.items()}, *args, **kwargs)

    utils.validate_and_filter_param_map_keys = validate_the_keys_lora_pairs_stand_for
    utils.save_adapter_files = save_numpy_adapter_files


def main() -> None:
    patch()
    sys.argv = [TO_HUGGINGFACE, *sys.argv[1:]]
    runpy.run_module(TO_HUGGINGFACE, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
