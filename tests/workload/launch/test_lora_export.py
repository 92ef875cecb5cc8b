"""A LoRA checkpoint's keys pass to_huggingface's check (workload/launch/lora_export.py): MaxText 0.2.3's own check
stops at the `_lora_a`/`_lora_b` keys, the patched one checks the keys they stand for and still refuses a key the
parameter map lacks. Real MaxText on CPU; the whole export of a trained adapter:
tests/workload/test_qlora_pipeline.py."""

import json
import os
import subprocess

from tests.workload.tiny_run import REPO

CHECK = """
import json
from maxtext.checkpoint_conversion.utils import utils
from workload.launch import lora_export

mapped = {"params-decoder-layers-layers_0-self_attention-query-kernel", "params-decoder-decoder_norm-scale"}
lora = {"params-decoder-layers-layers_0-self_attention-query-kernel" + s for s in lora_export.LORA_SUFFIXES}
state = mapped | lora  # as to_huggingface's main builds it: the pairs, and the keys they stand for


def outcome(keys):
    try:
        return sorted(utils.validate_and_filter_param_map_keys(mapped, keys))
    except ValueError as error:
        return str(error).splitlines()[0]


before = outcome(state)
lora_export.patch()
print(json.dumps({"unpatched": before, "patched": outcome(state), "unmapped": outcome(state | {"params-stray"})}))
"""


def test_the_adapters_keys_are_checked_by_the_keys_they_stand_for(maxtext_python):
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([maxtext_python, "-c", CHECK], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["unpatched"] == "maxtext_state_dict must be a subset of flattened param_map"
    assert found["patched"] == [
        "params-decoder-decoder_norm-scale",
        "params-decoder-layers-layers_0-self_attention-query-kernel",
    ]
    assert found["unmapped"] == "maxtext_state_dict must be a subset of flattened param_map"
