"""A LoRA run (`tuning: lora`) on real MaxText 0.2.3 (CPU, tiny Gemma 3), from the shared converted tiny model to the
kept model, its checkpoints in the bucket: Tunix's loop trains the adapter alone and its held-out loss falls; the
trainer is kill -9'd once the adapter's first checkpoint is in the bucket and the run, started again, resumes from it
(the adapter and its optimizer restored, the frozen weights read from the converted base again); export writes the
adapter as a PEFT repository and peft's merge of it into the exported base; verify finds both within the logit bound
of MaxText with the adapter applied; keep keeps both, and each loads in transformers/peft as a user loads it
(docs/tuning.md)."""

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
from workload.measure.logit_parity import KL_BOUND
from workload.run import kept

STEPS, CHECKPOINT_PERIOD = 20, 10
RANK, ALPHA = 4, 8.0
RUNS_PREFIX = "lora-runs"
# The rehearsal's LoRA settings (rehearsal/__main__.py LORA) at a rank of its own, on four of the seven projections.
# A held-out pass at every checkpoint: the one the killed attempt made there is the one its resume makes first.
LORA = {
    **TINY_SETTINGS,
    "steps": STEPS,
    "checkpointPeriod": CHECKPOINT_PERIOD,
    "evalInterval": CHECKPOINT_PERIOD,
    "learningRate": 0.005,
    "tuning": "lora",
    "loraRank": RANK,
    "loraAlpha": ALPHA,
    "loraModules": ["q_proj", "v_proj", "o_proj", "down_proj"],
}


@dataclass
class LoraResume:
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


def killed_and_resumed(
    python: str, converted: Path, gcs, tmp: Path, settings: dict, runs_prefix: str, env: dict | None = None
) -> LoraResume:
    """A run of `settings` from the converted tiny model, its trainer killed after the checkpoint at
    `CHECKPOINT_PERIOD` and its held-out pass, then started again to the end; `env` added to both attempts'."""
    work, out, config = from_converted(converted, tmp, settings)
    interrupted, killed_at, _ = start_and_kill_trainer_after_checkpoint(
        python, config, work, out, tmp, gcs, runs_prefix, evaluated_at(CHECKPOINT_PERIOD), env
    )
    finished = run_workload(python, config, work, out, "--runs-dir", gcs.gs(runs_prefix), env=env)
    run_name = finished.summary.get("run_name") or ""
    return LoraResume(interrupted, killed_at, finished, f"{runs_prefix}/gemma3-4b/post-train/{run_name}/checkpoints")


@pytest.fixture(scope="module")
def lora_run(maxtext_python, tiny_converted, gcs, tmp_path_factory) -> LoraResume:
    return killed_and_resumed(maxtext_python, tiny_converted, gcs, tmp_path_factory.mktemp("lora"), LORA, RUNS_PREFIX)


def test_the_adapter_trains_and_the_held_out_loss_falls(lora_run):
    assert_it_trained_and_learned(lora_run.finished)
    curve = dict(lora_run.summary["eval_curve"])
    assert set(curve) == {0, CHECKPOINT_PERIOD, STEPS}
    assert curve[STEPS] < curve[CHECKPOINT_PERIOD] < curve[0]


def assert_it_trained_and_learned(run: Run) -> None:
    """Every step ran, and the held-out loss after them is below the base model's."""
    summary = run.summary
    assert run.returncode == 0 and summary["ok"], f"{summary}\n{run.stderr[-3000:]}"
    assert summary["final_step"] == STEPS
    curve = dict(summary["eval_curve"])
    assert curve[STEPS] < curve[0]


def test_a_killed_lora_run_resumes_from_its_adapters_checkpoint_not_from_step_zero(lora_run):
    assert lora_run.killed_at == CHECKPOINT_PERIOD
    assert lora_run.interrupted.summary["failed_step"] == "train"
    (resume,) = [e for e in lora_run.finished.events if e["event"] == "resume"]
    assert resume["from_step"] == CHECKPOINT_PERIOD
    (train_log,) = [p for p in lora_run.summary["logs"] if "/train-" in p]
    assert first_logged_step(train_log) == CHECKPOINT_PERIOD + 1


def test_the_resumed_model_is_the_one_the_killed_attempt_had_at_its_checkpoint(lora_run):
    """The resumed attempt's first held-out pass, before any update, sees the model the killed attempt evaluated
    after the same step: the adapter from the checkpoint, the frozen weights from the converted base (the checkpoint
    holds no others). An adapter started anew would read step 0's loss, and a base that was not the converted one
    would read neither."""
    killed = {e["step"]: e["eval_loss"] for e in lora_run.interrupted.events if e["event"] == "eval"}
    resumed = [e for e in lora_run.finished.events if e["event"] == "eval"]
    assert resumed[0]["step"] == CHECKPOINT_PERIOD
    assert killed[CHECKPOINT_PERIOD] != killed[0]
    assert resumed[0]["eval_loss"] == pytest.approx(killed[CHECKPOINT_PERIOD], abs=1e-3)  # MaxText logs 3 decimals


def test_the_resume_continues_the_adapters_optimizer(lora_run, gcs, maxtext_python, tmp_path):
    """Tunix restores the adapter's optimizer state with the adapter: in the final checkpoint the optimizer's step,
    Adam's count and the schedule's count are the run's steps, not the steps since the resume."""
    counts = optimizer_step_counts(maxtext_python, gcs, f"{lora_run.checkpoints}/{STEPS}/optimizer_state", tmp_path)
    assert len(counts) == 4 and set(counts.values()) == {STEPS}, counts  # step, gradient_step, Adam's, schedule's


def test_the_checkpoint_holds_the_adapter_alone(lora_run, gcs, maxtext_python, tmp_path):
    assert lora_run.summary["trained_checkpoint"] == gcs.gs(f"{lora_run.checkpoints}/{STEPS}/model_params")
    local = tmp_path / "model_params"
    gcs.download(f"{lora_run.checkpoints}/{STEPS}/model_params", local)
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


def test_the_merged_model_and_the_adapter_match_maxtexts_logits_with_the_adapter_applied(lora_run):
    verify = lora_run.summary["verify"]
    assert verify["ok"], verify
    assert verify["logits_kl_max"] <= KL_BOUND["tiny"] and verify["adapter_logits_kl_max"] <= KL_BOUND["tiny"]
    # The merge is rounded to the export's bf16, where MaxText adds the adapter to the float32 base: a random tiny
    # model's near-ties may then pick another top token, which the KL bound above weighs.
    assert verify["logits_top1_agreement"] >= 0.95 and verify["adapter_logits_top1_agreement"] >= 0.95
    print({k: v for k, v in verify.items() if "logits" in k})  # the figures, for the record (pytest -s)


def test_both_are_kept_and_load_in_transformers_and_peft(lora_run, maxtext_python):
    model_dir = lora_run.summary["kept_dir"]
    with open(f"{model_dir}/{kept.ADAPTER}/adapter_config.json") as f:
        adapter = json.load(f)
    assert (adapter["r"], adapter["lora_alpha"], adapter["peft_type"]) == (RANK, ALPHA, "LORA")
    assert set(adapter["target_modules"]) == {"q_proj", "v_proj", "o_proj", "down_proj"}
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


def test_the_hub_stand_in_takes_the_kept_model_and_the_adapter_loads_from_it(lora_run, maxtext_python, tmp_path):
    token_file = tmp_path / "hf_write_token"
    token_file.write_text(WRITE_TOKEN + "\n")
    token_file.chmod(0o600)
    with HubStandin(token=WRITE_TOKEN) as hub:
        kept_dir = Path(lora_run.summary["kept_dir"])
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
        env={**os.environ, "JAX_PLATFORMS": "cpu", "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout
