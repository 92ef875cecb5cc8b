"""The post-deploy tasks: one command per phase, chained, re-run exactly when their inputs change."""

import json
import socket

import pytest

from infra.phases import OWN_INPUTS, PHASES
from rehearsal.engine import is_secret, plain, run_program
from workload.config import PipelineConfig

COMMAND = "command:local:Command"
INSTANCE = "gcp:compute/instance:Instance"


def phases(stack):
    by_name = {r.name.rsplit("-", 1)[1]: r for r in stack.of_type(COMMAND)}
    return {phase: by_name[phase] for phase in PHASES}


def test_each_phase_runs_the_remote_cli(mock_stack):
    for phase, command in phases(mock_stack()).items():
        assert command.inputs["create"] == f".venv/bin/python -m remote phase {phase}"
        assert command.inputs["logging"] == "stdoutAndStderr"  # live progress in `pulumi up`
        assert command.inputs["addPreviousOutputInEnv"] is False  # no unbounded env var from the last run
        assert "dir" not in command.inputs  # runs in the project directory: relative paths, same state anywhere


def test_phases_are_chained_after_the_vm(mock_stack):
    stack = mock_stack()
    steps = phases(stack)
    vm = stack.one(INSTANCE)
    firewall = stack.one("gcp:compute/firewall:Firewall")
    assert vm.urn in steps["bootstrap"].dependencies or any("TpuVm" in d for d in steps["bootstrap"].dependencies)
    assert any("SshFirewall" in d or d == firewall.urn for d in steps["bootstrap"].dependencies)
    for before, after in zip(PHASES, PHASES[1:]):
        assert steps[before].urn in steps[after].dependencies


def test_environment_names_the_target_and_pipeline(mock_stack, dev_config):
    for command in phases(mock_stack()).values():
        env = command.inputs["environment"]
        assert set(env) == {"TPU_SFT_TARGET", "TPU_SFT_PIPELINE"}
        target = json.loads(env["TPU_SFT_TARGET"])
        assert target == {
            "host": "tpu-sft-dev",
            "user": "tpu-sft",
            "key_path": "~/.ssh/google_compute_engine",  # a path, never the key
            "known_hosts": ".tpu-sft/known_hosts/dev-tpu-sft-dev-id",  # pinned per VM instance id
            "gateway": "gcloud compute start-iap-tunnel %h %p --listen-on-stdin --zone=us-east5-b "
                       "--project=my-tpu-project --verbosity=warning",
            "trust_on_first_use": True,
        }
        pipeline = PipelineConfig.from_mapping(json.loads(env["TPU_SFT_PIPELINE"]))
        assert pipeline.steps == 1000 and pipeline.model == "gemma3-4b"
        assert not any(is_secret(v) for v in env.values())  # a secret here would make every output secret


def test_no_secret_in_any_phase(mock_stack):
    token = "hf_" + "Zyx987" * 6
    stack = mock_stack({"tpu-sft:hfToken": token}, secret_keys=("tpu-sft:hfToken",))
    for command in phases(stack).values():
        assert token not in json.dumps(command.inputs)
    assert token not in json.dumps([plain(r.inputs) for r in stack.resources])
    (uploader,) = [r for r in stack.of_type(COMMAND) if r.name.endswith("-hf-token")]
    assert uploader.inputs["create"] == ".venv/bin/python -m remote put-secret hf_token"
    assert uploader.urn in phases(stack)["bootstrap"].dependencies  # the token is on the VM before convert


def test_triggers_are_vm_identity_and_phase_inputs(mock_stack):
    for phase, command in phases(mock_stack()).items():
        instance_id, inputs = command.inputs["triggers"]
        assert instance_id == "tpu-sft-dev-id"  # a replaced VM has a new id: every phase re-runs
        assert set(OWN_INPUTS[phase]) <= set(inputs)


def test_every_pipeline_setting_triggers_some_phase():
    covered = {key for keys in OWN_INPUTS.values() for key in keys}
    assert covered == set(PipelineConfig.KEYS.values())


def _triggers(mock_stack, overrides):
    return {phase: c.inputs["triggers"] for phase, c in phases(mock_stack(overrides)).items()}


@pytest.mark.parametrize(
    ("change", "rerun"),
    [
        ({"tpu-sft:steps": "2000"}, {"train", "export"}),
        ({"tpu-sft:perDeviceBatchSize": "4"}, {"train", "export"}),
        ({"tpu-sft:learningRate": "1e-4"}, {"train", "export"}),
        ({"tpu-sft:model": "gemma3-12b"}, {"convert", "train", "export"}),
        ({"tpu-sft:maxtextVersion": "0.2.3"}, {"bootstrap", "convert", "train", "export"}),
        ({"tpu-sft:instanceName": "tpu-sft-other"}, {"bootstrap", "convert", "train", "export"}),
        ({"tpu-sft:labels": '{"owner": "someone-else"}'}, set()),
        ({"tpu-sft:pricePerChipHour": "3.1"}, set()),
    ],
)
def test_change_table(mock_stack, change, rerun):
    before, after = _triggers(mock_stack, {}), _triggers(mock_stack, change)
    assert {phase for phase in PHASES if before[phase] != after[phase]} == rerun


def test_unchanged_config_declares_identical_commands(mock_stack):
    """Pulumi re-runs a command only when its inputs differ: same config, no phase runs, no SSH at all."""
    first, second = phases(mock_stack()), phases(mock_stack())
    for phase in PHASES:
        assert first[phase].inputs == second[phase].inputs


def test_preview_connects_to_nothing(mock_stack, monkeypatch):
    attempts = []

    def refuse(sock, address):
        attempts.append(address)
        raise OSError("no network in a preview")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)
    stack = mock_stack()
    assert phases(stack)  # the whole program ran
    assert attempts == []


def test_phase_names_match_the_remote_cli():
    from remote.phase import PHASES as REMOTE_PHASES

    assert REMOTE_PHASES == PHASES


def test_phase_summaries_become_stack_outputs(dev_config, monkeypatch):
    monkeypatch.setenv("HF_TOKEN", "hf_" + "Tok3n" * 8)  # an update needs one (tests/unit/test_settings_errors.py)
    train = {"event": "summary", "ok": True, "final_step": 1000, "chip_hours": 1.37}
    export = {**train, "final_loss": 1.23, "trained_checkpoint": "/dev/shm/ckpt/1000/model_params",
              "kept_dir": "/mnt/tpu-sft-data/tpu-sft/run", "verify": {"ok": True}}
    stdout = {"train": "train step 1000/1000 · loss 1.2300\n" + json.dumps(train) + "\n",
              "export": "✓ keep done in 3 s\n" + json.dumps(export) + "\n"}
    outputs = run_program(dev_config, preview=False, command_stdout=stdout).outputs
    assert outputs["finalStep"] == 1000
    assert outputs["finalLoss"] == 1.23
    assert outputs["trainedCheckpoint"] == "/dev/shm/ckpt/1000/model_params"
    assert outputs["modelDir"] == "/mnt/tpu-sft-data/tpu-sft/run"
    assert outputs["verify"] == {"ok": True}
    assert outputs["chipHoursUsed"] == 1.37


def test_the_phases_keep_the_model_where_the_vm_mounts_the_data_disk():
    from infra.disk import MOUNT_POINT
    from remote.phase import DATA_DISK_MOUNT, DEFAULT_OUTPUT_DIR

    assert DATA_DISK_MOUNT == MOUNT_POINT and DEFAULT_OUTPUT_DIR.startswith(MOUNT_POINT + "/")
