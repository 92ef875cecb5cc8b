"""The stack's side of preflight (infra/preflight/compile_step.py): which compile a stack's train inputs name, and
`pulumi up` refusing a VM that a preflight of the same inputs found not to fit. The records here are written in the form
`python -m workload.preflight` prints (its real output is checked in tests/workload/preflight/test_preflight.py)."""

from __future__ import annotations

import json

import pytest
from pulumi import RunError

from infra.config.read_settings import parse
from infra.preflight import compile_step
from rehearsal.engine import Stack, run_program
from workload.core.contract import EXIT_BAD_INPUT

GIB = 2**30


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setattr(compile_step, "CACHE", tmp_path / "preflight")
    return tmp_path / "preflight"


def pipeline_of(config: dict[str, str]):
    return parse(config, stack="dev").pipeline


def keep(config: dict[str, str], *, fits: bool) -> None:
    """What `compile_once` keeps after a preflight of `config`'s train inputs."""
    path = compile_step.record_path(pipeline_of(config))
    path.parent.mkdir(parents=True, exist_ok=True)
    used = (15.8 if fits else 44.53) * GIB
    path.write_text(
        json.dumps(
            {"fits": fits, "accelerator": "v6e-8", "hbm_bytes_per_chip": used, "hbm_limit_bytes_per_chip": 31.25 * GIB}
        )
    )


def test_the_train_fingerprint_names_what_the_compile_depends_on(dev_config):
    base = compile_step.train_fingerprint(pipeline_of(dev_config))
    for key, value in [
        ("tpu-sft:perDeviceBatchSize", "2"),
        ("tpu-sft:maxTargetLength", "1024"),
        ("tpu-sft:acceleratorType", "v6e-16"),
        ("tpu-sft:model", "gemma3-12b"),
    ]:
        other = {**dev_config, key: value}
        if key == "tpu-sft:acceleratorType":  # a slice stack, as it must be set
            other = {k: v for k, v in other.items() if k not in ("tpu-sft:dataDiskSizeGb", "tpu-sft:dataDiskType")}
            other["tpu-sft:autostop"] = "off"
        assert compile_step.train_fingerprint(pipeline_of(other)) != base, key
    assert compile_step.train_fingerprint(pipeline_of({**dev_config, "tpu-sft:idleMinutes": "45"})) == base
    assert compile_step.train_fingerprint(pipeline_of(dev_config), ("base_num_decoder_layers=2",)) != base


def test_up_refuses_a_vm_that_a_preflight_found_not_to_fit(dev_config, cache, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_" + "x" * 34)  # an update needs one; the refusal comes before it is used
    config = {**dev_config, "tpu-sft:perDeviceBatchSize": "16"}
    keep(config, fits=False)
    declared = Stack()
    with pytest.raises(RunError) as raised:
        run_program(config, preview=False, into=declared)
    message = str(raised.value)
    assert message.startswith("tpu-sft:perDeviceBatchSize: is 16, and a preflight of these train inputs (")
    assert "needs at least 44.53 GiB of HBM per chip of a v6e-8, 31.25 GiB allowed" in message
    assert "Fix: pulumi config set tpu-sft:perDeviceBatchSize" in message and "\n" not in message
    assert declared.resources == []
    with pytest.raises(RunError, match=r"^tpu-sft:perDeviceBatchSize: is 16, and a preflight"):
        run_program(config)  # a preview says so too, before anyone runs `pulumi up`


def test_a_fit_or_other_inputs_leave_up_alone(dev_config, cache):
    keep({**dev_config, "tpu-sft:perDeviceBatchSize": "16"}, fits=False)
    keep(dev_config, fits=True)
    assert run_program(dev_config).of_type("gcp:compute/instance:Instance")
    assert run_program({**dev_config, "tpu-sft:perDeviceBatchSize": "2"}).of_type("gcp:compute/instance:Instance")


def test_overrides_are_set_as_pulumi_config_set_would():
    raw = {"tpu-sft:steps": "1000"}
    assert compile_step.with_overrides(raw, ["tpu-sft:perDeviceBatchSize=16", "tpu-sft:runName=a=b"]) == {
        "tpu-sft:steps": "1000",
        "tpu-sft:perDeviceBatchSize": "16",
        "tpu-sft:runName": "a=b",
    }


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["perDeviceBatchSize=16"], "preflight: perDeviceBatchSize=16: is not an override. Fix: give tpu-sft:KEY="),
        (["tpu-sft:perDeviceBatchSize"], "preflight: tpu-sft:perDeviceBatchSize: is not an override."),
        (["tpu-sft:perDeviceBatchSize=many"], "preflight: tpu-sft:perDeviceBatchSize: "),
        (["tpu-sft:stepz=3"], "preflight: tpu-sft:stepz: is not a tpu-sft setting"),
    ],
)
def test_bad_input_is_one_line_and_compiles_nothing(argv, expected, capsys, cache, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_PYTHON", "/nonexistent/python")  # reached only if the input passed
    assert compile_step.main([str(compile_step.REPO / "Pulumi.dev.yaml"), *argv]) == EXIT_BAD_INPUT
    err = capsys.readouterr().err
    assert err.startswith(expected) and err.count("\n") == 1, err
    assert not cache.exists()


def test_a_missing_maxtext_python_is_one_line(capsys, cache, monkeypatch):
    monkeypatch.setenv("PREFLIGHT_PYTHON", "/nonexistent/python")
    assert compile_step.main([str(compile_step.REPO / "Pulumi.dev.yaml")]) == EXIT_BAD_INPUT
    assert capsys.readouterr().err == (
        "preflight: PREFLIGHT_PYTHON: /nonexistent/python is not an executable Python. "
        "Fix: run scripts/maxtext-venv, or point PREFLIGHT_PYTHON at a Python that has MaxText\n"
    )


def test_data_the_preview_refuses_is_refused_before_maxtext_is_looked_for(capsys, cache, monkeypatch, tmp_path):
    from tests.fixtures.datasets import good_rows, write_jsonl

    monkeypatch.setenv("PREFLIGHT_PYTHON", "/nonexistent/python")  # reached only if the data passed
    data = write_jsonl(tmp_path / "chats.jsonl", good_rows(), broken="missing column")
    overrides = [f"tpu-sft:dataset={data}", "tpu-sft:evalData=5%"]
    assert compile_step.main(["--data", str(compile_step.REPO / "Pulumi.dev.yaml"), *overrides]) == EXIT_BAD_INPUT
    assert capsys.readouterr().err == (
        f"preflight: tpu-sft:dataset: {data}: row 3 has no column 'messages' (its columns: text). "
        "Fix: fix the file, or pulumi config set tpu-sft:dataset another file\n"
    )
