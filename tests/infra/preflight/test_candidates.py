"""The configurations a sweep ranks (infra/preflight/candidates.py): a candidate fills only the levers a stack leaves
unset, and the ones that fit are ranked by their predicted tokens/s per chip (the whole sweep: test_batch_auto.py)."""

from __future__ import annotations

import pytest

from infra.preflight import candidates
from workload.core.config import PipelineConfig


def test_a_candidate_fills_the_levers_the_stack_leaves_unset():
    stack = PipelineConfig(attention="flash")
    tiled = candidates.applied(stack, {"trainer": "native", "vocabTiling": 4})
    assert tiled == PipelineConfig(attention="flash", vocab_tiling=4)
    assert candidates.levers(tiled) == {"trainer": "native", "attention": "flash", "vocabTiling": 4}
    assert candidates.applied(stack, {}) == stack


@pytest.mark.parametrize(
    ("stack", "candidate"),
    [
        (PipelineConfig(remat_policy="full"), {"rematPolicy": "minimal"}),  # the stack set it
        (PipelineConfig(trainer="tunix"), {"trainer": "native"}),  # the loop is the stack's
        (PipelineConfig(trainer="tunix"), {"vocabTiling": 4}),  # untested in Tunix's loop (MaxText 0.2.2 refused it)
        (PipelineConfig(attention="dot_product"), {"flashBlockSize": 1024}),  # the flash kernel's, and no flash
    ],
)
def test_a_candidate_the_stack_contradicts_or_its_rules_refuse_is_not_compiled(stack, candidate):
    assert candidates.applied(stack, candidate) is None


def test_the_configurations_are_the_tables_each_once_the_stacks_own_first(monkeypatch):
    monkeypatch.setattr(candidates, "CANDIDATES", ({}, {"vocabTiling": 4}, {"trainer": "native"}, {"vocabTiling": 4}))
    assert candidates.configurations(PipelineConfig()) == [PipelineConfig(), PipelineConfig(vocab_tiling=4)]


def _record(batch: int, fits: bool, tokens: float, levers: dict) -> dict:
    prediction = {"tokens_per_s_per_chip": tokens, "mfu": tokens / 100_000, "step_s": 0.5, "bound": "compute"}
    return {
        "fits": fits,
        "levers": levers,
        "settings": {"per_device_batch_size": batch},
        "hbm_bytes_per_chip": batch,
        "step_time": prediction,
    }


def test_the_ones_that_fit_rank_by_predicted_tokens_per_second_per_chip():
    records = [
        _record(4, True, 30_000, {"trainer": "native"}),
        _record(8, False, 50_000, {"trainer": "native"}),  # faster on paper, and does not fit
        _record(8, True, 40_000, {"trainer": "native", "vocabTiling": 4}),
    ]
    ranking = candidates.ranked(records)
    assert [(r["per_device_batch_size"], r["tokens_per_s_per_chip"]) for r in ranking] == [(8, 40_000), (4, 30_000)]
    assert candidates.settings_of(ranking[0]) == {"trainer": "native", "vocabTiling": 4, "perDeviceBatchSize": 8}
    assert candidates.describe(ranking[1]) == (
        "trainer native, perDeviceBatchSize 4: 30,000 tokens/s per chip, 30.0% MFU predicted "
        "(500 ms a step, compute-bound)"
    )
