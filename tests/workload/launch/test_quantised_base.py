"""QLoRA's key on MaxText 0.2.3 (workload/launch/quantised_base.py): taken out of MaxText's argv, which 0.2.3 would
refuse it in, and handed to qwix's provider as a later release hands it; each of its patches refuses code it was not
read in. Real MaxText and qwix on CPU for the second part."""

import json
import os
import subprocess

from tests.workload.tiny_run import REPO
from workload.launch import quantised_base

LORA_ARGS = ["lora.enable_lora=true", "lora.lora_rank=4"]


def test_the_key_is_taken_out_of_maxtexts_argv():
    assert quantised_base.take([*LORA_ARGS, "lora.lora_weight_qtype=nf4", "steps=3"]) == (
        [*LORA_ARGS, "steps=3"],
        "nf4",
    )


def test_without_the_key_the_argv_is_left_as_it_is():
    assert quantised_base.take([*LORA_ARGS, "steps=3"]) == ([*LORA_ARGS, "steps=3"], None)


PROVIDER = """
import json
from types import SimpleNamespace
from maxtext.layers import nnx_decoders
from maxtext.utils import lora_utils
from qwix._src import flax_util
from qwix._src.providers import ptq
from workload.launch import pinned_code, quantised_base

ORIGINALS = [(lora_utils, "_build_lora_provider"), (flax_util, "update_sharding"), (flax_util, "find_param"),
             (ptq, "create_quantized_param"), (nnx_decoders, "nnx")]
ORIGINALS = [(module, name, getattr(module, name)) for module, name in ORIGINALS]

lora = SimpleNamespace(lora_module_path="decoder/layers/.*mlp/wo", lora_rank=4, lora_alpha=8.0)
config = SimpleNamespace(lora=lora)
before = lora_utils._build_lora_provider(config)._rules[0].weight_qtype
quantised_base.patch("int8")
[rule] = lora_utils._build_lora_provider(config)._rules
refused = {}
for digest in ("BUILD_PROVIDER_SHA256", "UPDATE_SHARDING_SHA256", "FIND_PARAM_SHA256", "CREATE_QUANTIZED_SHA256",
               "DECODER_CALL_SHA256"):
    kept = getattr(quantised_base, digest)
    setattr(quantised_base, digest, "0" * 64)
    for module, name, original in ORIGINALS:  # the pinned code again, as a fresh process has it
        setattr(module, name, original)
    try:
        quantised_base.patch("int8")
    except pinned_code.PatchedCodeChanged as error:
        refused[digest] = str(error).split(" differs")[0]
    setattr(quantised_base, digest, kept)
print(json.dumps({"before": before, "qtype": rule.weight_qtype, "rank": rule.rank, "alpha": rule.alpha,
                  "path": rule.module_path, "refused": refused}))
"""


def test_maxtexts_provider_quantises_the_frozen_weights_and_the_patches_are_guarded(maxtext_python):
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([maxtext_python, "-c", PROVIDER], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["before"] is None  # 0.2.3's provider quantises nothing
    assert (found["qtype"], found["rank"], found["alpha"], found["path"]) == ("int8", 4, 8.0, "decoder/layers/.*mlp/wo")
    assert found["refused"] == {
        "BUILD_PROVIDER_SHA256": "maxtext 0.2.3's _build_lora_provider",
        "UPDATE_SHARDING_SHA256": "qwix 0.1.6's update_sharding",
        "FIND_PARAM_SHA256": "qwix 0.1.6's find_param",
        "CREATE_QUANTIZED_SHA256": "qwix 0.1.6's create_quantized_param",
        "DECODER_CALL_SHA256": "maxtext 0.2.3's NNXDecoder.__call__",
    }
