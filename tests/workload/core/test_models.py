"""A model is one row of workload/core/models.py, complete, and what else names models is derived from the rows."""

from __future__ import annotations

import dataclasses

import pytest

from infra.pricing import cost
from workload.core.config import ConfigError, PipelineConfig
from workload.core.models import GEMMA_TERMS, MODELS, SHAPE_KEYS, Licence, Model


def missing(model: Model) -> list[str]:
    """The fields of a row that are not given: an empty text, a shape without one of SHAPE_KEYS (or not a whole
    number above 0), a licence with a field empty."""
    gaps = [field.name for field in dataclasses.fields(model) if getattr(model, field.name) in ("", None)]
    if not isinstance(model.licence, Licence):
        gaps.append("licence")
    else:
        licence = model.licence
        gaps += [f"licence.{f.name}" for f in dataclasses.fields(licence) if not getattr(licence, f.name)]
    shape = model.shape or {}
    gaps += [f"shape.{key}" for key in SHAPE_KEYS if not (isinstance(shape.get(key), int) and shape[key] > 0)]
    gaps += [f"shape.{key} (unknown)" for key in set(shape) - set(SHAPE_KEYS)]
    return gaps


@pytest.mark.parametrize("name", sorted(MODELS))
def test_each_row_is_complete_and_named_as_maxtext_names_it(name):
    model = MODELS[name]
    assert missing(model) == []
    assert model.maxtext_name == name
    assert model.hub_id.count("/") == 1


def test_a_row_with_a_field_missing_is_found():
    row = MODELS["gemma3-4b"]
    shape = {key: value for key, value in row.shape.items() if key != "vocab_size"}
    broken = dataclasses.replace(row, hub_id="", shape=shape, licence=dataclasses.replace(GEMMA_TERMS, notice=""))
    assert missing(broken) == ["hub_id", "licence.notice", "shape.vocab_size"]


def test_the_model_setting_takes_exactly_the_rows():
    for name in MODELS:
        assert PipelineConfig.from_mapping({"model": name}).model == name
    with pytest.raises(ConfigError) as refused:
        PipelineConfig.from_mapping({"model": "gemma3-1b"})
    assert f"is not one of {', '.join(MODELS)}" in str(refused.value)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_costs_size_each_model_by_its_rows_shape(name):
    parameters = MODELS[name].parameters
    assert cost.kept_model_seconds(name, 1) == round(parameters * cost.KEPT_MODEL_BYTES_PER_PARAMETER / cost.MIB, 1)
    gb = cost.checkpoint_cost(name, 10, None, 30, 1.0)["gb"]
    assert gb == round(parameters * cost.CHECKPOINT_BYTES_PER_PARAMETER / 1e9, 1)
