"""The VM trains with the Tunix the tests ran: its install pins the trainer's libraries exactly as the MaxText
venv's lock does (workload/core/lock.py), nothing installed after it replaces them unless the user asks, and the
preview says so when they do."""

import shlex
from pathlib import Path

import pytest

from infra.config.read_settings import parse
from remote.pipeline.bootstrap.seed import spec_for
from workload.core import lock
from workload.core.config import PipelineConfig

ROOT = Path(__file__).resolve().parents[4]


def _installed(spec) -> dict[str, str]:
    """The `name==version` pins on the MaxText step's `uv pip install` command line."""
    (step,) = [s for s in spec.steps if s.name == "maxtext"]
    words = shlex.split(step.command)
    return dict(w.split("==", 1) for w in words[words.index("install") + 1 :] if "==" in w and "[" not in w)


def test_the_vms_install_pins_every_trainer_library_as_the_lock_does():
    pins = _installed(spec_for(PipelineConfig()))
    assert pins == {name: lock.versions()[name] for name in lock.TRAINER}
    assert pins["google-tunix"] == "0.1.7"  # the first on PyPI that checkpoints the optimizer (docs/checkpoints.md)
    # The MaxText it pins them for is the lock's.
    assert PipelineConfig().maxtext_version == lock.versions()["maxtext"]


def test_nothing_after_the_install_replaces_them_by_default():
    assert [s.name for s in spec_for(PipelineConfig()).steps if s.name == "post-train-extras"] == []
    dev = (ROOT / "Pulumi.dev.yaml").read_text()
    assert 'tpu-sft:installPostTrainExtras: "false"' in dev


@pytest.fixture
def dev_settings(dev_config):
    return lambda **changed: parse({**dev_config, **changed}, stack="dev")


def test_the_preview_warns_in_one_line_when_the_vm_would_train_with_another_tunix(dev_settings):
    assert dev_settings().warnings == ()
    (extras,) = dev_settings(**{"tpu-sft:installPostTrainExtras": "true"}).warnings
    assert "tpu-sft:installPostTrainExtras true" in extras and "google-tunix 0.1.7" in extras
    assert "46.56 GB" in extras and extras.endswith("pulumi config set tpu-sft:installPostTrainExtras false")
    (other,) = dev_settings(**{"tpu-sft:maxtextVersion": "0.2.5"}).warnings
    assert "tpu-sft:maxtextVersion 0.2.5" in other and "MaxText 0.2.3 with google-tunix 0.1.7" in other
    assert "\n" not in extras + other
    # The VM's install for another MaxText pins none of the tested libraries: they may not fit it.
    assert _installed(spec_for(PipelineConfig(maxtext_version="0.2.5"))) == {}


@pytest.mark.maxtext
def test_the_tests_and_the_preflight_run_the_same_tunix():
    """.maxtext-venv (every MaxText test, the rehearsals' local hosts, the preflight's compiled step) holds the lock's
    versions: read from the installed distributions' metadata, not by importing them."""
    (site,) = (ROOT / ".maxtext-venv/lib").glob("python3.*/site-packages")
    for name in lock.TRAINER:
        dist = name.replace("-", "_")
        found = sorted(p.name for p in site.glob("*.dist-info") if p.name.lower().startswith(f"{dist}-"))
        assert found == [f"{dist}-{lock.versions()[name]}.dist-info"], (name, found)
