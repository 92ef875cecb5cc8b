"""The publish task of `pulumi up`, run as pulumi-command runs it: recorded from the real program under the mock
engine (rehearsal config, with both destinations and a Hub write token as a secret), executed against a local
sshd standing in for the VM, whose kept model is a small directory laid out as `keep` leaves it.

Cloud Storage is gcp-storage-emulator (a real local server of its JSON API) behind the IAM stand-in: the job on
the VM reaches it as the VM's service account, with roles/storage.objectUser on the destination bucket, the
grant the README tells the user to give (the program declares none there); the Hub is a local stand-in of its
upload API (tests/hub_upload_standin.py), since neither Google Cloud nor the Hub can be reached from here.
"""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import pytest

from rehearsal import gcs_emulator
from rehearsal.__main__ import CONFIG
from rehearsal.local_host import LocalHost
from rehearsal.run import Executed, Recorded, execute, record
from rehearsal.storage_iam import StorageIam, host_identity
from rehearsal.storage_roles import PREDEFINED_ROLES
from tests import gemma3_export
from tests.hub_upload_standin import HubStandin
from tests.workload.eval.reports import comparisons, write_report
from workload.core.config import PipelineConfig
from workload.core.contract import PIPELINE_ENV
from workload.run.commands import run_name
from workload.run.fingerprint import manifest

pytestmark = [pytest.mark.sshd, pytest.mark.maxtext]  # the VM is a LocalHost: an sshd, linking .maxtext-venv

WRITE_TOKEN = "hf_" + "PublishCanary" * 3


@pytest.fixture
def gcs():
    iam = StorageIam(gcs_emulator.start("models"), {})
    yield iam
    iam.stop()


@pytest.fixture
def hub():
    with HubStandin(token=WRITE_TOKEN) as standin:
        yield standin


@pytest.fixture
def vm(tmp_path):
    host = LocalHost.start(tmp_path / "vm")
    yield host
    host.stop()


def test_pulumi_up_publishes_the_kept_model_once(vm, gcs, hub, tmp_path):
    overrides = {
        **vm.config_overrides(),
        "tpu-sft:publishGcsUri": "gs://models/team/gemma-sft",
        "tpu-sft:publishHubRepo": "team/gemma-sft",
        "tpu-sft:hfWriteToken": WRITE_TOKEN,
    }
    stack, commands = record(CONFIG, overrides, secret_keys=("tpu-sft:hfWriteToken",))
    vm_account = host_identity(stack)
    gcs.grants = {vm_account: {"models": PREDEFINED_ROLES["roles/storage.objectUser"]}}
    by_name = {c.name.removeprefix("tpu-sft-rehearsal-pipeline-"): c for c in commands}
    assert [n for n in by_name if n.startswith("publish")] == ["publish-hf-write-token", "publish"]
    run_dir = tmp_path / "run"
    env = {
        **vm.environment(by_name["bootstrap"].environment, run_dir),
        "STORAGE_EMULATOR_HOST": gcs.url(vm_account),
        "HF_ENDPOINT": hub.endpoint,
    }
    assert execute(by_name["bootstrap"], env, echo=False).returncode == 0  # links the MaxText venv

    kept = kept_export(by_name["publish"], run_dir)
    files = manifest(str(kept), hashes=True)
    (kept / "manifest.json").write_text(json.dumps({"run_name": kept.name, "files": files}, indent=1))
    write_report(kept, comparisons(610))  # the eval step's report: GSM8K 0.71 → 0.61, ten points down

    token = execute(by_name["publish-hf-write-token"], env, echo=False)
    blocked = execute(by_name["publish"], env, echo=False)  # tpu-sft:evalGate block, the default
    assert blocked.returncode != 0
    (refusal,) = [line for line in blocked.stdout.splitlines() if line.startswith("✗ publish: ")]
    assert "GSM8K 0.71 → 0.61" in refusal and f"{kept.name}/eval/report.json" in refusal
    assert refusal.endswith("pulumi config set tpu-sft:evalGate warn, then pulumi up (nothing is trained again)")
    with urllib.request.urlopen(f"{gcs.emulator.url}/storage/v1/b/models/o") as response:
        assert json.load(response).get("items", []) == []
    assert hub.repos == {}

    # `pulumi config set tpu-sft:evalGate warn`, `pulumi up`: only the publish task's inputs change.
    _, warned = record(CONFIG, {**overrides, "tpu-sft:evalGate": "warn"}, secret_keys=("tpu-sft:hfWriteToken",))
    warned_by_name = {c.name.removeprefix("tpu-sft-rehearsal-pipeline-"): c for c in warned}
    assert [n for n in by_name if by_name[n] != warned_by_name[n]] == ["publish"]
    first = execute(warned_by_name["publish"], env, echo=False)
    assert first.returncode == 0, first.stdout + first.stderr
    assert "⚠ published with tpu-sft:evalGate warn, although the fine-tuned model is worse" in first.stdout
    # The export's two files and the model card; the manifest, under tpu-sft/, with them.
    assert "✓ published to gs://models/team/gemma-sft: 3 file(s) sent, 0 already there" in first.stdout
    assert "✓ published to hf://team/gemma-sft: 3 file(s) sent, 0 already there" in first.stdout
    with urllib.request.urlopen(f"{gcs.emulator.url}/storage/v1/b/models/o") as response:
        stored = {o["name"] for o in json.load(response)["items"]}
    paths = ("tpu-sft/manifest.json", "config.json", "model.safetensors", "README.md")
    assert stored == {f"team/gemma-sft/{p}" for p in paths}
    assert hub.repos["team/gemma-sft"]["private"] is True
    assert json.loads(hub.content("team/gemma-sft", "tpu-sft/manifest.json"))["run_name"] == kept.name

    again = execute(warned_by_name["publish"], env, echo=False)  # a `pulumi up` that re-runs it: the same model
    assert again.returncode == 0
    assert "✓ published to gs://models/team/gemma-sft: already there, nothing sent" in again.stdout
    assert "✓ published to hf://team/gemma-sft: already there, nothing sent" in again.stdout

    assert_the_token_is_in_its_file_only(vm, token, first, again)


def kept_export(publish: Recorded, run_dir: Path) -> Path:
    """What export's keep step left on the data disk, where the publish task looks for it: an export as
    to_huggingface writes it (the publish step lays it out as the text-only model); the manifest is the caller's."""
    pipeline = PipelineConfig.from_mapping(json.loads(publish.environment[PIPELINE_ENV]))
    kept = run_dir / "disk" / run_name(pipeline)
    (kept / "hf-model").mkdir(parents=True)
    gemma3_export.write(kept / "hf-model" / "model.safetensors", gemma3_export.export_tensors(16_000))
    (kept / "hf-model" / "config.json").write_text(json.dumps(gemma3_export.EXPORT_CONFIG))
    return kept


def assert_the_token_is_in_its_file_only(vm: LocalHost, *tasks: Executed) -> None:
    """The write token: in a 0600 file on the host, and in no task's output, log or job file."""
    secret = vm.state_dir / "secrets" / "hf_write_token"
    assert secret.read_text() == WRITE_TOKEN and secret.stat().st_mode & 0o777 == 0o600
    for task in tasks:
        assert WRITE_TOKEN not in task.stdout + task.stderr
    for path in (vm.state_dir / "jobs").rglob("*"):
        if path.is_file():
            assert WRITE_TOKEN not in path.read_text(errors="replace"), path


def test_pulumi_up_publishes_a_lora_runs_adapter_alone_to_the_repo_the_stack_names(vm, hub, tmp_path):
    """tpu-sft:publishHubAdapterRepo without publishHubRepo: the adapter goes to its repo with its card, the merged
    model nowhere, and the write token stays in its 0600 file."""
    overrides = {
        **vm.config_overrides(),
        "tpu-sft:trainer": "tunix",
        "tpu-sft:tuning": "lora",
        "tpu-sft:publishHubAdapterRepo": "team/gemma-sft-lora",
        "tpu-sft:hfWriteToken": WRITE_TOKEN,
    }
    _, commands = record(CONFIG, overrides, secret_keys=("tpu-sft:hfWriteToken",))
    by_name = {c.name.removeprefix("tpu-sft-rehearsal-pipeline-"): c for c in commands}
    run_dir = tmp_path / "run"
    env = {**vm.environment(by_name["bootstrap"].environment, run_dir), "HF_ENDPOINT": hub.endpoint}
    assert execute(by_name["bootstrap"], env, echo=False).returncode == 0  # links the MaxText venv

    kept = kept_export(by_name["publish"], run_dir)  # a LoRA run's keeps its adapter beside the merged model
    (kept / "hf-adapter").mkdir()
    (kept / "hf-adapter" / "adapter_config.json").write_text(json.dumps({"peft_type": "LORA", "r": 16}))
    (kept / "hf-adapter" / "adapter_model.safetensors").write_bytes(b"\0" * 4_000)
    settings = {"model": "gemma3-4b", "profile": "tiny", "tuning": "lora", "trainer": "tunix"}
    files = manifest(str(kept), hashes=True)
    (kept / "manifest.json").write_text(json.dumps({"run_name": kept.name, "settings": settings, "files": files}))
    write_report(kept)  # one the gate passes

    token = execute(by_name["publish-hf-write-token"], env, echo=False)
    done = execute(by_name["publish"], env, echo=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{kept.name} → hf://team/gemma-sft-lora\n" in done.stdout
    assert "✓ published to hf://team/gemma-sft-lora: 3 file(s) sent, 0 already there" in done.stdout
    assert set(hub.repos) == {"team/gemma-sft-lora"}
    files_there = set(hub.repos["team/gemma-sft-lora"]["files"])
    assert files_there == {"adapter_config.json", "adapter_model.safetensors", "README.md", "tpu-sft/manifest.json"}
    assert "its merge into the base was not published" in hub.content("team/gemma-sft-lora", "README.md").decode()
    assert_the_token_is_in_its_file_only(vm, token, done)
