"""The step-time model: what a compiled step costs each chip, read from the compiler, and the step time it predicts.

The fast tests read HLO text in the forms XLA prints; the MaxText-tier test compiles FSDP's collectives for 8 devices
with .maxtext-venv's JAX and reads them back from the real executable.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from workload.core.accelerators import ACCELERATORS
from workload.preflight import step_time
from workload.preflight.step_time import CompiledCost

REPO = Path(__file__).resolve().parents[3]

# A scanned layer's loop as XLA:TPU prints it: FSDP's all-gather of the layer's weights (asynchronous: its `-start`
# holds the operand and the result, its `-done` the result) and the reduce-scatter of its gradients, in a body run
# 34 times; the loss's all-reduce in the entry, over a listed group; a collective over groups of one chip.
SCANNED = (Path(__file__).parent / "fixtures" / "scanned_fsdp.hlo.txt").read_text()


def test_collectives_count_the_bytes_each_chip_sends_once_per_run_of_their_loop():
    sent = step_time.collective_bytes(SCANNED)
    gathered = 2560 * 1280 * 2  # the -done's result; the -start is not counted again
    assert sent["all-gather"] == pytest.approx(34 * gathered * 7 / 8)
    assert sent["reduce-scatter"] == pytest.approx(34 * 320 * 1280 * 4 * 7)
    assert sent["all-reduce"] == pytest.approx(2 * 4 * 4 * 7 / 8)  # the loss only: the groups of one move nothing
    assert set(sent) == {"all-gather", "reduce-scatter", "all-reduce"}


def test_a_module_without_collectives_sends_nothing():
    assert (
        step_time.collective_bytes(
            "HloModule m\n\nENTRY %main (a: f32[2]) -> f32[2] {\n  ROOT %a = f32[2] parameter(0)\n}\n"
        )
        == {}
    )


def test_a_loop_without_a_known_trip_count_counts_its_body_once():
    unknown = SCANNED.replace(
        ', backend_config={"known_trip_count":{"n":"34"},"known_init_step":{"init":"0","step":"1"}}', ""
    )
    assert step_time.collective_bytes(unknown)["all-gather"] == pytest.approx(2560 * 1280 * 2 * 7 / 8)


def test_a_collective_in_a_computation_the_loop_calls_runs_with_the_loop():
    called = SCANNED.replace(
        "  ROOT %t = (s32[], bf16[2560,1280]) tuple(%i, %ag-done)",
        "  %c = f32[8]{0} call(%y), to_apply=%inner\n  ROOT %t = (s32[], bf16[2560,1280]) tuple(%i, %ag-done)",
    ).replace(
        "ENTRY %main",
        "%inner (q: f32[1]) -> f32[8] {\n  ROOT %cp = f32[8]{0} collective-permute(%q), channel_id=9, "
        "source_target_pairs={{0,1},{1,2}}\n}\n\nENTRY %main",
    )
    assert step_time.collective_bytes(called)["collective-permute"] == 34 * 8 * 4


V6E_8 = ACCELERATORS["v6e-8"]


def test_hbm_traffic_hides_in_part_under_compute_and_collectives_under_both():
    peak = V6E_8.peak_bf16_tflops_per_chip * 1e12
    cost = CompiledCost(flops=peak * step_time.MATMUL_EFFICIENCY * 0.2, hbm_bytes=1638e9 * 0.05, collective_bytes={})
    hidden = {"all-gather": V6E_8.ici_bytes_sent_per_s_per_chip * 0.2}  # 0.2 s of collectives under the rest
    prediction = step_time.predict(CompiledCost(cost.flops, cost.hbm_bytes, hidden), V6E_8, 2048, peak * 0.1)
    step = 0.2 + (1 - step_time.HBM_OVERLAP) * 0.05
    assert prediction.step_s == pytest.approx(step)
    assert (prediction.compute_s, prediction.hbm_s, prediction.collectives_s) == pytest.approx((0.2, 0.05, 0.2))
    assert prediction.tokens_per_s_per_chip == pytest.approx(2048 / step)
    assert prediction.mfu == pytest.approx(0.1 / step)
    assert prediction.bound == "compute"


def test_collectives_that_take_longer_than_the_rest_bound_the_step():
    slow = {"reduce-scatter": V6E_8.ici_bytes_sent_per_s_per_chip * 0.5, "all-gather": 0.0}
    prediction = step_time.predict(CompiledCost(1e12, 1e9, slow), V6E_8, 4096, 1e12)
    assert prediction.step_s == pytest.approx(0.5) and prediction.bound == "collectives"


def test_hbm_traffic_bounds_a_step_with_more_of_it_than_compute():
    prediction = step_time.predict(CompiledCost(1e9, 1638e9 * 0.3, {}), V6E_8, 2048, 1e9)
    assert prediction.bound == "HBM" and prediction.step_s == pytest.approx(0.3, rel=0.01)
    assert prediction.step_s > prediction.hbm_s  # the compute beside it, in part


FSDP_PROGRAM = """
import json, os
os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
os.environ["JAX_PLATFORMS"] = "cpu"
from functools import partial
import jax, jax.numpy as jnp
from jax.sharding import Mesh, PartitionSpec as P
from workload.preflight import step_time

mesh = Mesh(jax.devices(), ("fsdp",))

@partial(jax.shard_map, mesh=mesh, in_specs=(P("fsdp"), P("fsdp")), out_specs=(P("fsdp"), P("fsdp")))
def step(w, g):
    def layer(i, carry):  # each layer's weights gathered, its gradient reduced and scattered, as FSDP does
        w, g = carry
        full = jax.lax.all_gather(w, "fsdp", tiled=True)
        g = g + jax.lax.psum_scatter(full * full, "fsdp", tiled=True)
        return w + g, g
    w, g = jax.lax.fori_loop(0, 5, layer, (w, g))
    return w + jax.lax.psum(g, "fsdp"), g

shard = jax.ShapeDtypeStruct((8 * 1024,), jnp.float32)
print(json.dumps(step_time.compiled_cost(jax.jit(step).lower(shard, shard).compile()).__dict__))
"""


@pytest.mark.usefixtures("maxtext_python")
def test_a_compiled_executables_collectives_are_read_from_its_own_text(maxtext_python):
    """The executable's own HLO text, not a hand-written one: the forms the parser reads are the compiler's."""
    done = subprocess.run(
        [maxtext_python, "-c", FSDP_PROGRAM], cwd=REPO, capture_output=True, text=True, timeout=300, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    cost = json.loads(done.stdout.strip().splitlines()[-1])
    shard = 1024 * 4
    assert cost["collective_bytes"] == {
        "all-gather": pytest.approx(5 * 8 * shard * 7 / 8),
        "reduce-scatter": pytest.approx(5 * shard * 7),
        "all-reduce": pytest.approx(2 * shard * 7 / 8),
    }
    assert cost["flops"] > 0 and cost["hbm_bytes"] > 0


def test_loop_factors_count_a_loops_matrix_multiplies_once_per_iteration():
    """XLA:TPU's cost analysis counts a loop's body once; the factors scale its totals to every iteration."""
    conv = (
        "  %w{i} = bf16[2560,1280]{{1,0}} parameter({i})\n"
        "  %x{i} = bf16[2048,2560]{{1,0}} parameter({j})\n"
        "  %c{i} = bf16[2048,1280]{{1,0}} convolution(%x{i}, %w{i}), dim_labels=bf_io->bf\n"
    )
    body = conv.format(i=1, j=2).replace("  %c1", "  ROOT %c1")
    hlo = (
        "HloModule m\n\n%body.1 (p: bf16[1]) -> bf16[2048,1280] {\n" + body + "}\n\n"
        "%cond.1 (p: bf16[1]) -> pred[] {\n  %n = s32[] constant(5)\n"
        "  ROOT %lt = pred[] compare(%i, %n), direction=LT\n}\n\n"
        "ENTRY %main (a: bf16[1]) -> bf16[2048,1280] {\n" + conv.format(i=3, j=4) + "  %loop = bf16[2048,1280] "
        "while(%t), condition=%cond.1, body=%body.1\n  ROOT %r = bf16[2048,1280] copy(%c3)\n}\n"
    )
    flops, _ = step_time.loop_factors(hlo)
    assert flops == pytest.approx((5 + 1) / 2)  # the loop's body 5 times and the entry's once, against once each
