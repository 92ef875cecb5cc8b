"""The fresh-VM rehearsal runs the real bootstrap spec, changed only where named (no VM needed)."""

from __future__ import annotations

import dataclasses

import pytest

from rehearsal.fresh_vm.substitutions import VM_UV_CACHE, SubstitutionError, transform
from remote.pipeline.bootstrap.seed import spec_for
from remote.pipeline.bootstrap.spec import BootstrapSpec, Step
from workload.core.config import PipelineConfig

VENV = ".tpu-sft/maxtext_venv"


def real_spec(**settings) -> BootstrapSpec:
    return spec_for(PipelineConfig.from_mapping({"profile": "tiny", **settings}), venv=VENV)


def test_steps_this_machine_can_run_are_the_real_ones_unchanged():
    real = real_spec(installPostTrainExtras=False)
    changed, _ = transform(real)
    kept = {s.name: s for s in changed.steps if s.name in ("apt", "venv")}
    assert kept == {s.name: s for s in real.steps if s.name in ("apt", "venv")}
    # The eval venv is left out by name (test_each_unreachable_step_is_replaced_and_named): the rest keep their order.
    assert [s.name for s in changed.steps] == [s.name for s in real.steps if s.name != "eval-venv"]


def test_each_unreachable_step_is_replaced_and_named():
    real = real_spec(installPostTrainExtras=False)
    changed, made = transform(real)
    by_name = {s.name: s.command for s in changed.steps}
    assert "astral.sh" not in by_name["uv"] and "sha256sum -c" in by_name["uv"]
    assert "uv python install" not in by_name["python"]
    assert "UV_TORCH_BACKEND" not in by_name["maxtext"]
    real_maxtext = next(s.command for s in real.steps if s.name == "maxtext")
    overrides, _, install = real_maxtext.partition(" UV_TORCH_BACKEND=cpu ")
    torch = "printf '%s\\n' torch==2.11.0 torchvision==0.26.0 > .tpu-sft/maxtext_venv/torch-from-pypi.txt"
    assert by_name["maxtext"].startswith(f"{overrides} {torch} && {install} --override ")
    assert changed.env["UV_CACHE_DIR"] == VM_UV_CACHE
    assert [m.name for m in made] == [
        *("uv-from-pypi", "python-from-host", "torch-from-pypi", "no-eval-venv", "uv-cache", "tls-trust")
    ]


def test_the_post_train_extras_are_left_out_by_name():
    changed, made = transform(real_spec(installPostTrainExtras=True))
    assert "post-train-extras" not in [s.name for s in changed.steps]
    assert "no-post-train-extras" in [m.name for m in made]


def test_a_real_spec_of_another_shape_stops_the_rehearsal():
    real = real_spec(installPostTrainExtras=False)
    reshaped = BootstrapSpec(
        tuple(
            dataclasses.replace(s, command="uv pip install maxtext") if s.name == "maxtext" else s for s in real.steps
        )
    )
    with pytest.raises(SubstitutionError, match="update _maxtext"):
        transform(reshaped)


def test_the_steps_keep_what_they_need_and_a_left_out_step_hands_on_its_own_needs():
    real = real_spec(installPostTrainExtras=True)
    # A later step that needs the (detached) extras, so detached itself.
    smoke = Step("smoke", "true", after=("post-train-extras",), detached=True)
    changed, _ = transform(BootstrapSpec((*real.steps, smoke), real.env))
    assert {s.name: s.after for s in changed.steps} == {
        "apt": (),
        "uv": (),
        "python": ("uv",),
        "venv": ("python",),
        "maxtext": ("venv",),
        "smoke": ("apt", "maxtext"),
    }
