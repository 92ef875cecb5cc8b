"""The single-host adapter pipeline: a QLoRA run (`tuning: qlora`, int8 here; the rehearsal runs nf4) on real MaxText
0.2.3 (CPU, tiny Gemma 3), over two devices, from the shared converted tiny model to the kept model, its checkpoints in
the bucket. Tunix's loop trains the adapter alone on frozen weights qwix quantised (workload/launch/quantised_base.py)
and its held-out loss falls; the trainer is kill -9'd once the adapter's first checkpoint is in the bucket and the run,
started again, resumes from it (the adapter and its optimizer restored, the base read from the converted checkpoint
and quantised again); export writes the adapter as a PEFT repository and peft's merge of it into the bf16 base; verify
finds both within the logit bound of MaxText with the adapter on that base and reports, not bounded, the merged
model's distance to MaxText with the base quantised as in training; keep keeps both, and each loads in
transformers/peft as a user loads it, also from the Hub stand-in (docs/tuning.md).

One run carries what LoRA's and QLoRA's pipelines share (the adapter's checkpoint, resume, export, verify, keep and
publish are the same code for both): a second whole run for plain LoRA would repeat them. Plain LoRA's training, its
resume from the adapter's checkpoint, export and logit parity run end to end on the slice rehearsal
(tests/slice/test_lora_slice.py) and in `scripts/rehearse --lora`; its step's compile in the LoRA preflight
(tests/workload/preflight/test_lora_preflight.py)."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.hub_upload_standin import HubStandin
from tests.workload.publish.test_publish import WRITE_TOKEN, publish_to_hub
from tests.workload.tiny_run import (
    REPO,
    TINY_SETTINGS,
    Run,
    first_logged_step,
    from_converted,
    optimizer_step_counts,
    run_workload,
    start_and_kill_trainer_after_checkpoint,
)
from workload.measure import devices
from workload.measure.logit_parity import KL_BOUND
from workload.run import kept

STEPS, CHECKPOINT_PERIOD = 20, 10
RANK, ALPHA = 4, 8.0
RUNS_PREFIX = "qlora-runs"
# The rehearsal's LoRA settings (rehearsal/__main__.py LORA) at a rank of its own, on four of the seven projections,
# with the base quantised to int8. A held-out pass at every checkpoint: the one the killed attempt made there is the
# one its resume makes first.
QLORA = {
    **TINY_SETTINGS,
    "steps": STEPS,
    "checkpointPeriod": CHECKPOINT_PERIOD,
    "evalInterval": CHECKPOINT_PERIOD,
    "learningRate": 0.005,
    "tuning": "qlora",
    "loraWeightQtype": "int8",
    "loraRank": RANK,
    "loraAlpha": ALPHA,
    "loraModules": ["q_proj", "v_proj", "o_proj", "down_proj"],
}
# Two CPU devices, every step of the run: the quantised model sharded over a mesh (fsdp) as over a VM's chips, which
# one device never shows, through the checkpoints, the resume and the export. Two, not more: the tiny data set holds
# the 20 steps' sequences at a global batch of 2 (at 4 it ran out at step 12). The checkpoints' readers below see the
# same two devices, which the checkpoints' sharding names.
ON_TWO_DEVICES = {"XLA_FLAGS": "--xla_force_host_platform_device_count=2"}


@dataclass
class AdapterResume:
    interrupted: Run  # the first attempt, whose trainer was killed after its first checkpoint and held-out pass
    killed_at: int  # the bucket's last checkpoint then
    finished: Run  # the second, which resumed from it and went on to the kept model
    checkpoints: str  # the run's checkpoint prefix in the bucket

    @property
    def summary(self) -> dict:
        return self.finished.summary


def evaluated_at(step: int):
    """Whether the runner has reported the held-out pass after `step`: Tunix saves a step's checkpoint first."""
    return lambda events: any(e["event"] == "eval" and e["step"] == step for e in events)


@pytest.fixture(scope="module")
def qlora_run(maxtext_python, tiny_converted, gcs, tmp_path_factory) -> AdapterResume:
    """The run from the converted tiny model, its trainer killed after the checkpoint at `CHECKPOINT_PERIOD` and its
    held-out pass, then started again to the end."""
    work, out, config = from_converted(tiny_converted, tmp_path_factory.mktemp("qlora"), QLORA)
    interrupted, killed_at, _ = start_and_kill_trainer_after_checkpoint(
        maxtext_python,
        config,
        work,
        out,
        work.parent,
        gcs,
        RUNS_PREFIX,
        evaluated_at(CHECKPOINT_PERIOD),
        ON_TWO_DEVICES,
    )
    finished = run_workload(maxtext_python, config, work, out, "--runs-dir", gcs.gs(RUNS_PREFIX), env=ON_TWO_DEVICES)
    run_name = finished.summary.get("run_name") or ""
    return AdapterResume(interrupted, killed_at, finished, f"{RUNS_PREFIX}/gemma3-4b/post-train/{run_name}/checkpoints")


def test_the_adapter_trains_on_the_quantised_base_over_two_devices_and_the_held_out_loss_falls(qlora_run):
    summary = qlora_run.summary
    assert qlora_run.finished.returncode == 0 and summary["ok"], f"{summary}\n{qlora_run.finished.stderr[-3000:]}"
    assert summary["final_step"] == STEPS
    curve = dict(summary["eval_curve"])
    assert set(curve) == {0, CHECKPOINT_PERIOD, STEPS}
    assert curve[STEPS] < curve[CHECKPOINT_PERIOD] < curve[0]
    (train_log,) = [p for p in summary["logs"] if "/train-" in p]
    with open(train_log, errors="replace") as f:
        [found] = [parsed for line in f if (parsed := devices.parse(line))]
    assert found["device_count"] == 2


def test_a_killed_run_resumes_from_its_adapters_checkpoint_on_the_adapter_it_had_there(qlora_run):
    """The resumed attempt starts after the checkpoint, and its first held-out pass, before any update, reads the
    killed attempt's at that step: the adapter from the checkpoint, the frozen weights from the converted base,
    quantised again as before (the checkpoint holds no others). An adapter started anew would read step 0's loss, and
    a base that was not the converted one would read neither."""
    assert qlora_run.killed_at == CHECKPOINT_PERIOD
    assert qlora_run.interrupted.summary["failed_step"] == "train"
    (resume,) = [e for e in qlora_run.finished.events if e["event"] == "resume"]
    assert resume["from_step"] == CHECKPOINT_PERIOD
    (train_log,) = [p for p in qlora_run.summary["logs"] if "/train-" in p]
    assert first_logged_step(train_log) == CHECKPOINT_PERIOD + 1
    killed = {e["step"]: e["eval_loss"] for e in qlora_run.interrupted.events if e["event"] == "eval"}
    resumed = [e for e in qlora_run.finished.events if e["event"] == "eval"]
    assert resumed[0]["step"] == CHECKPOINT_PERIOD and killed[CHECKPOINT_PERIOD] != killed[0]
    assert resumed[0]["eval_loss"] == pytest.approx(killed[CHECKPOINT_PERIOD], abs=1e-3)  # MaxText logs 3 decimals


def test_the_resume_continues_the_adapters_optimizer(qlora_run, gcs, maxtext_python, tmp_path):
    """Tunix restores the adapter's optimizer state with the adapter: in the final checkpoint the optimizer's step,
    Adam's count and the schedule's count are the run's steps, not the steps since the resume."""
    optimizer_state = f"{qlora_run.checkpoints}/{STEPS}/optimizer_state"
    counts = optimizer_step_counts(maxtext_python, gcs, optimizer_state, tmp_path, ON_TWO_DEVICES)
    assert len(counts) == 4 and set(counts.values()) == {STEPS}, counts  # step, gradient_step, Adam's, schedule's


def test_the_checkpoint_holds_the_adapter_alone(qlora_run, gcs, maxtext_python, tmp_path):
    """Neither the frozen weights nor their quantised form: the resume reads those from the converted base."""
    assert qlora_run.summary["trained_checkpoint"] == gcs.gs(f"{qlora_run.checkpoints}/{STEPS}/model_params")
    local = tmp_path / "model_params"
    gcs.download(f"{qlora_run.checkpoints}/{STEPS}/model_params", local)
    listing = _in_maxtext_venv(
        maxtext_python,
        "import sys, jax, orbax.checkpoint as ocp\n"
        "tree = ocp.PyTreeCheckpointer().restore(sys.argv[1])\n"
        "print('\\n'.join(jax.tree_util.keystr(p) for p, _ in jax.tree_util.tree_flatten_with_path(tree)[0]))",
        str(local),
    )
    paths = listing.splitlines()
    assert paths and all("_lora_a" in p or "_lora_b" in p for p in paths), paths[:5]
    # 6 layers x 4 projections x (A, B)
    assert len(paths) == 6 * 4 * 2
    assert {p.split("['")[5].split("'")[0] for p in paths} == {"query", "value", "out", "wo"}


def test_the_export_is_faithful_to_the_adapter_on_the_bf16_base_and_its_distance_to_the_quantised_one_is_reported(
    qlora_run,
):
    verify = qlora_run.summary["verify"]
    assert verify["ok"], verify
    assert verify["logits_kl_max"] <= KL_BOUND["tiny"] and verify["adapter_logits_kl_max"] <= KL_BOUND["tiny"]
    # The merge is rounded to the export's bf16, where MaxText adds the adapter to the float32 base: a random tiny
    # model's near-ties may then pick another top token, which the KL bound above weighs.
    assert verify["logits_top1_agreement"] >= 0.95 and verify["adapter_logits_top1_agreement"] >= 0.95
    # The base the adapter trained on is not the one it is merged into: the distance to it is the quantisation's.
    assert verify["quantised_base_logits_kl_max"] > verify["logits_kl_max"]
    print({k: v for k, v in verify.items() if "logits" in k})  # the figures, for the record (pytest -s)


def test_both_are_kept_and_load_in_transformers_and_peft(qlora_run, maxtext_python):
    model_dir = qlora_run.summary["kept_dir"]
    with open(f"{model_dir}/{kept.ADAPTER}/adapter_config.json") as f:
        adapter = json.load(f)
    assert (adapter["r"], adapter["lora_alpha"], adapter["peft_type"]) == (RANK, ALPHA, "LORA")
    assert set(adapter["target_modules"]) == {"q_proj", "v_proj", "o_proj", "down_proj"}
    with open(f"{model_dir}/hf-model/config.json") as f:
        assert "quantization_config" not in json.load(f)  # the merge is into the unquantised base
    # A user's loads: the adapter by itself (its base is named in adapter_config.json), and the merged model.
    figures = _in_maxtext_venv(
        maxtext_python,
        "import sys, json, torch\n"
        "from peft import AutoPeftModelForCausalLM\n"
        "from transformers import AutoModelForImageTextToText\n"
        "ids = torch.tensor([[2, 105, 2364, 107, 506, 1000]])  # within the tiny vocabulary\n"
        "peft = AutoPeftModelForCausalLM.from_pretrained(sys.argv[1] + '/hf-adapter', dtype=torch.float32)\n"
        "merged = AutoModelForImageTextToText.from_pretrained(sys.argv[1] + '/hf-model', dtype=torch.float32)\n"
        "with torch.no_grad():\n"
        "    a, b = peft(input_ids=ids).logits, merged(input_ids=ids).logits\n"
        "print(json.dumps({'class': type(peft).__name__, 'max_diff': float((a - b).abs().max())}))",
        model_dir,
    )
    loaded = json.loads(figures.splitlines()[-1])
    assert loaded["class"] == "PeftModelForCausalLM"
    assert loaded["max_diff"] < 0.05  # the merge is in bf16 (the export's dtype); the adapter applies in float32


# By the adapter repo's id alone, as its card says (workload/publish/model_card.py `adapter_card`); its base, which
# adapter_config.json names, is the tiny model's own directory.
PEFT_FROM_THE_HUB = """
import json
from peft import AutoPeftModelForCausalLM
model = AutoPeftModelForCausalLM.from_pretrained("team/gemma-sft-lora")
print(json.dumps({"class": type(model).__name__, "r": model.peft_config["default"].r}))
"""


def test_the_hub_stand_in_takes_the_kept_model_and_the_adapter_loads_from_it(qlora_run, maxtext_python, tmp_path):
    token_file = tmp_path / "hf_write_token"
    token_file.write_text(WRITE_TOKEN + "\n")
    token_file.chmod(0o600)
    with HubStandin(token=WRITE_TOKEN) as hub:
        kept_dir = Path(qlora_run.summary["kept_dir"])
        # This run has no eval step; the gate's tests are tests/workload/eval and tests/workload/publish.
        code, summary = publish_to_hub(
            maxtext_python, hub, kept_dir, token_file, "--hub-adapter", "team/gemma-sft-lora", "--eval-gate", "off"
        )
        assert code == 0, summary
        assert set(summary["published"]) == {"hf://team/gemma-sft", "hf://team/gemma-sft-lora"}
        offline = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN_PATH")
        reader = {k: v for k, v in os.environ.items() if k not in offline}
        reader |= {"HF_ENDPOINT": hub.endpoint, "HF_HOME": str(tmp_path / "reader"), "HF_TOKEN": WRITE_TOKEN}
        done = subprocess.run(
            [maxtext_python, "-c", PEFT_FROM_THE_HUB], env=reader, capture_output=True, text=True, timeout=300
        )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == {"class": "PeftModelForCausalLM", "r": RANK}


def _in_maxtext_venv(python: str, code: str, *args: str) -> str:
    done = subprocess.run(
        [python, "-c", code, *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "JAX_PLATFORMS": "cpu", "HF_HUB_OFFLINE": "1", **ON_TWO_DEVICES},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout
