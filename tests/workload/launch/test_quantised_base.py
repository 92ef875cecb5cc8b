"""QLoRA's key on MaxText 0.2.3 (workload/launch/quantised_base.py): taken out of MaxText's argv, which 0.2.3 would
refuse it in, and handed to qwix's provider as a later release hands it; each of its patches refuses code it was not
read in. Real MaxText and qwix on CPU for the second part."""

import json
import os
import subprocess

import pytest

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
import qwix
from maxtext.utils import lora_utils
from qwix._src import flax_util
from qwix._src.providers import ptq
from workload.launch import pinned_code, quantised_base

ORIGINALS = [(lora_utils, "_build_lora_provider"), (flax_util, "update_sharding"), (flax_util, "find_param"),
             (ptq, "create_quantized_param"), (qwix, "apply_lora_to_model")]
ORIGINALS = [(module, name, getattr(module, name)) for module, name in ORIGINALS]

lora = SimpleNamespace(lora_module_path="decoder/layers/.*mlp/wo", lora_rank=4, lora_alpha=8.0)
config = SimpleNamespace(lora=lora)
before = lora_utils._build_lora_provider(config)._rules[0].weight_qtype
with quantised_base.quantising("nf4"):
    within = lora_utils._build_lora_provider(config)._rules[0].weight_qtype
after = lora_utils._build_lora_provider(config)._rules[0].weight_qtype
restored = all(getattr(module, name) is original for module, name, original in ORIGINALS)
quantised_base.patch("int8")
[rule] = lora_utils._build_lora_provider(config)._rules
refused = {}
for digest in ("BUILD_PROVIDER_SHA256", "UPDATE_SHARDING_SHA256", "FIND_PARAM_SHA256", "CREATE_QUANTIZED_SHA256",
               "APPLY_LORA_SHA256", "GRAPH_UPDATE_SHA256"):
    kept = getattr(quantised_base, digest)
    setattr(quantised_base, digest, "0" * 64)
    for module, name, original in ORIGINALS:  # the pinned code again, as a fresh process has it
        setattr(module, name, original)
    try:
        quantised_base.patch("int8")
    except pinned_code.PatchedCodeChanged as error:
        refused[digest] = str(error).split(" differs")[0]
    setattr(quantised_base, digest, kept)
# Another flax (the TPU host's 0.12.8) has no _graph_update_dynamic: a refusal in one line, not an AttributeError.
from flax.nnx import graph
kept = graph._graph_update_dynamic
del graph._graph_update_dynamic
for module, name, original in ORIGINALS:
    setattr(module, name, original)
try:
    quantised_base.patch("int8")
except pinned_code.PatchedCodeChanged as error:
    refused["absent"] = str(error)
graph._graph_update_dynamic = kept
print(json.dumps({"before": before, "within": within, "after": after, "restored": restored,
                  "qtype": rule.weight_qtype, "rank": rule.rank, "alpha": rule.alpha,
                  "path": rule.module_path, "refused": refused}))
"""


def test_maxtexts_provider_quantises_the_frozen_weights_and_the_patches_are_guarded(maxtext_python):
    env = {**os.environ, "PYTHONPATH": str(REPO), "JAX_PLATFORMS": "cpu"}
    done = subprocess.run([maxtext_python, "-c", PROVIDER], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["before"] is None  # 0.2.3's provider quantises nothing
    # The preflight's: patched for one compile, then the code as it was, for the next case's (bench/tpu/predict.py).
    assert (found["within"], found["after"], found["restored"]) == ("nf4", None, True)
    assert (found["qtype"], found["rank"], found["alpha"], found["path"]) == ("int8", 4, 8.0, "decoder/layers/.*mlp/wo")
    assert found["refused"] == {
        "BUILD_PROVIDER_SHA256": "maxtext 0.2.3's _build_lora_provider",
        "UPDATE_SHARDING_SHA256": "qwix 0.1.6's update_sharding",
        "FIND_PARAM_SHA256": "qwix 0.1.6's find_param",
        "CREATE_QUANTIZED_SHA256": "qwix 0.1.6's create_quantized_param",
        "APPLY_LORA_SHA256": "qwix 0.1.6's apply_lora_to_model",
        "GRAPH_UPDATE_SHA256": "flax 0.12.4's _graph_update_dynamic",
        "absent": "flax 0.12.4 has no flax.nnx.graph._graph_update_dynamic, which workload/launch/quantised_base.py "
        "replaces (written for flax 0.12.4). Fix: install flax==0.12.4, or re-read the code and update "
        "workload/launch/quantised_base.py",
    }


def _placed_over_four_devices(maxtext_python: str, *args: str) -> dict:
    script = REPO / "tests" / "workload" / "launch" / "quantised_mesh_live.py"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run([maxtext_python, str(script), *args], env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


@pytest.mark.parametrize("qtype", ["int8", "nf4"])
def test_an_unscanned_decoders_quantised_weights_are_placed_over_a_mesh_and_called_again(maxtext_python, qtype):
    """MaxText's unscanned layers write qwix's quantised kernel back nested in the old kernel's Param, whose sharding
    then splits the scale's one-element `embed` axis over fsdp; unnested, each part keeps qwix's own sharding."""
    placed = _placed_over_four_devices(maxtext_python, qtype)
    assert placed["fsdp"] == 4 and "stopped" not in placed, placed
    assert placed["kernel"] == "WithAux"  # qwix's quantised weight, not a Param holding its state
    assert placed["scale"]["shape"][0] == 1 and placed["scale"]["spec"][0] == "None"  # wo: (mlp, embed) → (1, embed)
    assert placed["calls"] == [[4, 32, 8192]] * 2  # the second call read the kernel qwix made in the first


def test_without_the_unnesting_the_placement_stops_where_the_preflight_did(maxtext_python):
    """The same script reaches the failure this guards against: the live test above cannot pass by missing it."""
    placed = _placed_over_four_devices(maxtext_python, "nf4", "--unpatched")
    assert placed["stopped"] == "placement" and placed["error"].startswith("IndivisibleError"), placed
