"""Publishing a kept model to Cloud Storage and the Hugging Face Hub: verified against its manifest, laid out as a
model repo (the export at the root, a model card, the run's files under tpu-sft/), a re-publish of the same model
sends nothing, an interrupted upload resumes without sending again what arrived, and the tiny model loads from
the Hub stand-in by its repo id alone.

Against gcp-storage-emulator (PyPI): a real local server of the Cloud Storage JSON API, reached by the MaxText
venv's google-cloud-storage through STORAGE_EMULATOR_HOST, as `python -m workload.publish` runs on the VM. The
"model" is a small directory laid out like a kept export, with its manifest as `keep` writes it.
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
from pathlib import Path

import pytest
import yaml

from rehearsal import gcs_emulator
from rehearsal.gcs_emulator import storage_emulator
from tests import gemma3_export
from tests.hub_upload_standin import HubStandin
from tests.workload.eval.reports import comparisons, write_report
from tests.workload.publish.cli import REPO, download, objects, publish
from workload.publish import text_only
from workload.run.fingerprint import manifest


@pytest.fixture
def gcs():
    with storage_emulator() as host:
        yield host


SETTINGS = {"model": "gemma3-4b", "profile": "full", "dataset": "HuggingFaceH4/ultrachat_200k"}
TRAIN_FACTS = {"eval_loss_first": 2.5, "eval_loss_first_step": 0, "eval_loss_final": 2.0, "eval_loss_final_step": 30}
SAMPLES = "# Before and after\n\nGreedy.\n\n| prompt | base model | fine-tuned |\n|---|---|---|\n| Hi | Hello | Hi! |\n"


def write_manifest(model: Path, settings: dict | None = None, **record_extra) -> None:
    """manifest.json as `keep` writes it (workload/run/steps.py): the settings, each step's facts, every file."""
    # keep's files: not the manifest itself, nor the eval report, which the eval step writes after keep
    files = [
        f
        for f in manifest(str(model), hashes=True)
        if f["path"] != "manifest.json" and not f["path"].startswith("eval/")
    ]
    steps = {"train": {"inputs": "f" * 64, "facts": TRAIN_FACTS}}
    record = {"run_name": model.name, "settings": settings or SETTINGS, "steps": steps, "files": files, **record_extra}
    (model / "manifest.json").write_text(json.dumps(record, indent=1))


def assert_published_manifest(model: Path, content_of) -> None:
    """The published tpu-sft/manifest.json: the kept one, with each rewritten file (the export's config and weights)
    listed as published, so that every file at the destination matches it as `fetch-model` checks a copy, and what
    keep recorded of those files under `text_only`."""
    kept = json.loads((model / "manifest.json").read_text())
    published = json.loads(content_of("tpu-sft/manifest.json"))
    for entry in published["files"]:
        data = content_of(repo_path(entry["path"]))
        assert (len(data), hashlib.sha256(data).hexdigest()) == (entry["size"], entry["sha256"]), entry["path"]
    rewritten = {"hf-model/config.json", "hf-model/model.safetensors"}
    assert published["text_only"]["kept"] == {
        e["path"]: {"size": e["size"], "sha256": e["sha256"]} for e in kept["files"] if e["path"] in rewritten
    }
    same = [e for e in kept["files"] if e["path"] not in rewritten]
    assert [e for e in published["files"] if e["path"] not in rewritten] == same
    assert {k: v for k, v in published.items() if k not in ("files", "text_only")} == {
        k: v for k, v in kept.items() if k != "files"
    }


def published_as(model: Path, kept_path: str, content: bytes) -> None:
    """`content` is what publishing puts where `kept_path` goes: the kept file itself, or for the export's config
    and weights the text-only model's (the same tensors' bytes under Gemma3ForCausalLM's names)."""
    kept_bytes = (model / kept_path).read_bytes()
    if kept_path == "hf-model/config.json":
        assert json.loads(content) == text_only.text_config(json.loads(kept_bytes))
    elif kept_path == "hf-model/model.safetensors":
        renamed = {text_only.text_name(name): data for name, data in gemma3_export.read(kept_bytes).items()}
        renamed.pop(None)  # the export's one vision weight is not published
        assert gemma3_export.read(content) == renamed
    else:
        assert content == kept_bytes, kept_path


@pytest.fixture
def kept(tmp_path) -> Path:
    """A kept model as `keep` leaves it: the export, the loss curve, verify.json, samples.md and manifest.json."""
    model = tmp_path / "gemma3-4b-sft-0123456789ab"
    (model / "hf-model").mkdir(parents=True)
    (model / "hf-model" / "config.json").write_text(json.dumps(gemma3_export.EXPORT_CONFIG))
    gemma3_export.write(model / "hf-model" / "model.safetensors", gemma3_export.export_tensors())
    (model / "loss.png").write_bytes(os.urandom(2_000))
    (model / "verify.json").write_text('{"ok": true}')
    (model / "samples.md").write_text(SAMPLES)
    write_manifest(model)
    write_report(model)  # one the gate passes: IFEval strict 0.78 → 0.80, GSM8K 0.71 → 0.69
    return model


def repo_path(kept_path: str) -> str:
    """Where the repo layout puts a kept file: the export at the root, the rest under tpu-sft/."""
    return kept_path.removeprefix("hf-model/") if kept_path.startswith("hf-model/") else f"tpu-sft/{kept_path}"


SENT = ["tpu-sft/loss.png", "tpu-sft/samples.md", "tpu-sft/verify.json", "config.json", "model.safetensors"]


def test_publish_lays_the_model_out_as_a_repo_with_a_card_manifest_last(maxtext_python, gcs, kept):
    code, summary = publish(maxtext_python, gcs, kept, "--gcs", "gs://models/team/gemma-sft")
    assert code == 0, summary
    result = summary["published"]["gs://models/team/gemma-sft"]
    assert result == {"unchanged": False, "skipped": 0, "uploaded": [*SENT, "README.md"]}  # the manifest's order
    stored = objects(gcs)
    assert set(stored) == {f"team/gemma-sft/{p}" for p in (*SENT, "README.md", "tpu-sft/manifest.json")}
    for entry in json.loads((kept / "manifest.json").read_text())["files"]:
        published_as(kept, entry["path"], download(gcs, f"team/gemma-sft/{repo_path(entry['path'])}"))
    assert_published_manifest(kept, lambda path: download(gcs, f"team/gemma-sft/{path}"))
    card = download(gcs, "team/gemma-sft/README.md").decode()
    assert card.startswith("---\n") and "\nlicense: gemma\n" in card
    assert "gcloud storage cp -r gs://models/team/gemma-sft" in card


def test_publishing_the_same_model_again_sends_nothing(maxtext_python, gcs, kept):
    publish(maxtext_python, gcs, kept, "--gcs", "gs://models/m")
    before = {name: o["generation"] for name, o in objects(gcs).items()}
    code, summary = publish(maxtext_python, gcs, kept, "--gcs", "gs://models/m")
    assert code == 0
    assert summary["published"]["gs://models/m"] == {"unchanged": True, "uploaded": [], "skipped": 6}
    assert {name: o["generation"] for name, o in objects(gcs).items()} == before  # nothing rewritten


# An upload that breaks at its third file, as a dropped link would break it: the real client and emulator,
# with the break injected into the destination.
BREAKING_UPLOAD = """
import sys
from workload.publish.__main__ import load_manifest, plan, publish
from workload.publish.gcs import GcsDestination

class Breaks(GcsDestination):
    sent = 0
    def upload(self, item):
        if self.sent == 2:
            raise ConnectionResetError("link dropped")
        super().upload(item)
        self.sent += 1

data, files = load_manifest(sys.argv[1])
publish(Breaks(sys.argv[2]), *plan(sys.argv[1], data, files, sys.argv[2], sys.argv[3]))
"""


def test_an_interrupted_upload_resumes(maxtext_python, gcs, kept, tmp_path):
    env = {**os.environ, "STORAGE_EMULATOR_HOST": gcs, "PYTHONPATH": str(REPO)}
    broken = subprocess.run(
        [maxtext_python, "-c", BREAKING_UPLOAD, str(kept), "gs://models/m", str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert "ConnectionResetError: link dropped" in broken.stderr
    assert set(objects(gcs)) == {"m/tpu-sft/loss.png", "m/tpu-sft/samples.md"}  # two files up, no manifest
    code, summary = publish(maxtext_python, gcs, kept, "--gcs", "gs://models/m")
    assert code == 0
    assert summary["published"]["gs://models/m"] == {
        "unchanged": False,
        "skipped": 2,
        "uploaded": [*SENT[2:], "README.md"],
    }
    assert_published_manifest(kept, lambda path: download(gcs, f"m/{path}"))


def test_a_model_that_no_longer_matches_its_manifest_is_not_published(maxtext_python, gcs, kept):
    (kept / "loss.png").write_bytes(b"changed after keep")
    code, summary = publish(maxtext_python, gcs, kept, "--gcs", "gs://models/m")
    assert code == 2
    assert summary["error"].endswith(
        "no longer matches its manifest (loss.png: size 18 != 2000); run the keep step again"
    )
    assert objects(gcs) == {}


def test_a_file_there_with_other_content_is_replaced(maxtext_python, gcs, kept):
    publish(maxtext_python, gcs, kept, "--gcs", "gs://models/m")
    (kept / "verify.json").write_text('{"ok": false}')  # a new model under the same name
    write_manifest(kept)
    code, summary = publish(maxtext_python, gcs, kept, "--gcs", "gs://models/m")
    assert code == 0 and summary["published"]["gs://models/m"]["uploaded"] == ["tpu-sft/verify.json"]


def test_a_model_kept_in_a_bucket_is_copied_checked_against_its_manifest_and_published(maxtext_python, kept, tmp_path):
    """A slice keeps its model in the bucket (its hosts share no disk); worker 0 publishes it from there."""
    emulator = gcs_emulator.start("models")
    try:
        emulator.upload(kept, f"kept/{kept.name}")
        staging = tmp_path / "staging"
        staged = ("--staging-dir", str(staging))
        source = f"gs://models/kept/{kept.name}"
        code, summary = publish(maxtext_python, emulator.url, source, "--gcs", "gs://models/team/gemma-sft", *staged)
        assert code == 0, summary
        assert len(summary["published"]["gs://models/team/gemma-sft"]["uploaded"]) == 6
        for entry in json.loads((kept / "manifest.json").read_text())["files"]:
            published_as(kept, entry["path"], download(emulator.url, f"team/gemma-sft/{repo_path(entry['path'])}"))
        assert list(staging.iterdir()) == []  # the copy is removed once published

        gemma3_export.write(kept / "hf-model" / "model.safetensors", gemma3_export.export_tensors())  # not kept
        emulator.upload(kept, "kept/tampered")
        code, summary = publish(
            maxtext_python, emulator.url, "gs://models/kept/tampered", "--gcs", "gs://models/t", *staged
        )
        assert code == 2 and "no longer matches its manifest" in summary["error"]
        code, summary = publish(
            maxtext_python, emulator.url, "gs://models/kept/none", "--gcs", "gs://models/t", *staged
        )
        assert (code, summary["error"]) == (
            2,
            "gs://models/kept/none holds no model: run the export phase first (its keep step)",
        )
        assert not any(name.startswith("t/") for name in objects(emulator.url))
    finally:
        emulator.stop()


def test_bad_input_is_one_line_before_anything_is_sent(maxtext_python, gcs, kept):
    code, summary = publish(maxtext_python, gcs, kept)
    assert code == 2 and summary["error"].startswith("nothing to publish to:")
    code, summary = publish(maxtext_python, gcs, kept, "--gcs", "s3://models/m")
    assert code == 2 and summary["error"] == "'s3://models/m' is not a gs://BUCKET/PATH address"
    code, summary = publish(maxtext_python, gcs, kept, "--hub", "just-a-name")
    assert code == 2 and summary["error"] == "--hub 'just-a-name' is not a Hub repo id: give OWNER/NAME"
    assert objects(gcs) == {}


# The Hub: huggingface_hub's own client (the MaxText venv's) pointed by HF_ENDPOINT at a local stand-in of the
# Hub's upload API (tests/hub_upload_standin.py), since the Hub itself cannot be reached from here.
WRITE_TOKEN = "hf_" + "Wr1teT0ken" * 4


def publish_to_hub(maxtext_python: str, hub: HubStandin, model: Path, token_file: Path, *extra: str):
    env = {**os.environ, "HF_ENDPOINT": hub.endpoint, "PYTHONPATH": str(REPO), "HF_HUB_DISABLE_TELEMETRY": "1"}
    env.pop("HF_TOKEN", None)
    argv = [
        maxtext_python,
        "-m",
        "workload.publish",
        str(model),
        "--hub",
        "team/gemma-sft",
        "--hf-token-file",
        str(token_file),
        *extra,
    ]
    done = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=180)
    assert WRITE_TOKEN not in " ".join(argv) + done.stdout + done.stderr  # never in argv, output or logs
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1])


def test_hub_publish_creates_a_private_repo_and_sends_the_model_in_one_commit(maxtext_python, hub, kept, token_file):
    code, summary = publish_to_hub(maxtext_python, hub, kept, token_file)
    assert code == 0, summary
    assert summary["published"]["hf://team/gemma-sft"]["uploaded"] == [*SENT, "README.md"]
    assert hub.repos["team/gemma-sft"]["private"] is True
    assert hub.commits == [("team/gemma-sft", [*SENT, "README.md", "tpu-sft/manifest.json"])]  # one commit, whole
    for name in ("hf-model/model.safetensors", "hf-model/config.json", "samples.md"):
        published_as(kept, name, hub.content("team/gemma-sft", repo_path(name)))
    assert_published_manifest(kept, lambda path: hub.content("team/gemma-sft", path))
    assert "lfs" in hub.repos["team/gemma-sft"]["files"]["model.safetensors"]  # the big one went by LFS
    card = hub.content("team/gemma-sft", "README.md").decode()
    assert 'AutoModelForCausalLM.from_pretrained("team/gemma-sft")' in card and WRITE_TOKEN not in card
    # The eval's scores as the Hub's evaluation results, which the stand-in validated as the Hub's validate-yaml does.
    (result, _) = yaml.safe_load(card.removeprefix("---\n").partition("\n---\n")[0])["model-index"][0]["results"]
    assert [m["value"] for m in result["metrics"]] == [0.8004, 0.78]  # IFEval strict: this fine-tune, then the base
    assert "passed: no benchmark worse than the base's by more than the 2-point margin" in card
    # The token travelled only as the bearer token of each API request (the LFS PUTs go to presigned URLs, as on
    # the Hub, and carry none), never in a URL or a body.
    for request in hub.requests:
        presigned = request["path"].startswith("/lfs-upload/")
        expected = None if presigned else f"Bearer {WRITE_TOKEN}"
        assert request["headers"].get("authorization") == expected, request["path"]
        assert WRITE_TOKEN not in request["path"] + request["body"]


def test_hub_republishing_the_same_model_commits_nothing(maxtext_python, hub, kept, token_file):
    publish_to_hub(maxtext_python, hub, kept, token_file)
    code, summary = publish_to_hub(maxtext_python, hub, kept, token_file)
    assert code == 0 and summary["published"]["hf://team/gemma-sft"]["unchanged"] is True
    assert len(hub.commits) == 1


def test_hub_publish_whose_commit_failed_resumes_without_sending_the_weights_again(
    maxtext_python, hub, kept, token_file
):
    hub.refuse_commits_after = 0  # the Hub fails the commit, after the weights' LFS upload
    code, summary = publish_to_hub(maxtext_python, hub, kept, token_file)
    assert code == 1 and "500" in summary["error"] and WRITE_TOKEN not in summary["error"]
    assert hub.repos["team/gemma-sft"]["files"] == {}  # a commit is whole or nothing
    hub.refuse_commits_after = None
    code, summary = publish_to_hub(maxtext_python, hub, kept, token_file)
    assert code == 0 and summary["published"]["hf://team/gemma-sft"]["uploaded"] == [*SENT, "README.md"]
    assert [paths for _, paths in hub.commits] == [[*SENT, "README.md", "tpu-sft/manifest.json"]]
    weights = [r for r in hub.requests if r["method"] == "PUT" and r["path"].startswith("/lfs-upload/")]
    assert len(weights) == 1  # the Hub already had the first attempt's LFS upload: not sent again


def test_hub_a_new_model_commits_only_the_files_that_changed(maxtext_python, hub, kept, token_file):
    publish_to_hub(maxtext_python, hub, kept, token_file)
    (kept / "verify.json").write_text('{"ok": false}')  # a new model under the same name
    write_manifest(kept)
    code, summary = publish_to_hub(maxtext_python, hub, kept, token_file)
    assert code == 0 and summary["published"]["hf://team/gemma-sft"]["uploaded"] == ["tpu-sft/verify.json"]
    assert hub.commits[-1] == ("team/gemma-sft", ["tpu-sft/verify.json", "tpu-sft/manifest.json"])


def test_hub_public_only_when_asked_and_a_wrong_token_is_refused(maxtext_python, hub, kept, token_file, tmp_path):
    publish_to_hub(maxtext_python, hub, kept, token_file, "--public")
    assert hub.repos["team/gemma-sft"]["private"] is False
    wrong = tmp_path / "wrong"
    wrong.write_text("hf_" + "n0tTheT0ken" * 3)
    wrong.chmod(0o600)
    code, summary = publish_to_hub(maxtext_python, hub, kept, wrong)
    assert code == 1 and "401" in summary["error"] and "n0tTheT0ken" not in summary["error"]


# Built in the MaxText venv: the tiny profile's random Gemma 3 and its tokenizer (workload/tiny/assets.py), its
# weights then laid out as MaxText 0.2.2's to_huggingface writes an export with use_multimodal=False: the language
# model's weights only, named `model.language_model.*` (maxtext checkpoint_conversion/utils/param_mapping.py), under
# the image-text config (vision_config kept): the export the pipeline keeps.
BUILD_TINY = """
import sys
from safetensors.torch import load_file, save_file
from workload.tiny import assets
assets.build_tokenizer(sys.argv[1])
assets.build_model(sys.argv[1])
path = sys.argv[1] + "/model.safetensors"
weights = load_file(path)
text = {"model.language_model." + k.removeprefix("language_model.model."): v for k, v in weights.items()
        if k.startswith("language_model.model.")}
assert len(text) < len(weights)  # the vision tower and projector are gone
save_file(text, path, metadata={"format": "pt"})
"""

EXPORT_FOLLOWS = "--- the kept export, as verify loads it ---"
# By the repo id alone, as a user of the published model loads it: the text-only model, every weight in place, and
# the same logits as the kept export loaded as verify loads it (workload/measure/verify_hf.py).
LOAD = """
import json, sys, torch
from transformers import AutoModelForCausalLM, AutoModelForImageTextToText, AutoTokenizer
tokenizer = AutoTokenizer.from_pretrained("team/gemma-sft")
model, info = AutoModelForCausalLM.from_pretrained("team/gemma-sft", output_loading_info=True)
print(EXPORT_FOLLOWS, file=sys.stderr, flush=True)  # the export lacks its vision tower: its report is expected
export = AutoModelForImageTextToText.from_pretrained(sys.argv[1])
chat = [{"role": "user", "content": "Tell me about rivers."}]
inputs = tokenizer.apply_chat_template(chat, add_generation_prompt=True, return_tensors="pt", return_dict=True)
with torch.no_grad():
    same = torch.equal(model(**inputs).logits, export(**inputs).logits)
info = {key: sorted(map(str, value)) for key, value in info.items()}
print(json.dumps({"model": type(model).__name__, "model_type": model.config.model_type, **info, "same_logits": same}))
""".replace("EXPORT_FOLLOWS", repr(EXPORT_FOLLOWS))


def test_the_published_tiny_model_loads_from_the_hub_by_its_repo_id_alone(maxtext_python, hub, token_file, tmp_path):
    """No Hub can be reached from here: transformers downloads from the stand-in (HF_ENDPOINT), through
    huggingface_hub's own resolve calls, into an empty cache, without `subfolder=`."""
    kept = tmp_path / "gemma3-4b-sft-tiny"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    built = subprocess.run(
        [maxtext_python, "-c", BUILD_TINY, str(kept / "hf-model")], env=env, capture_output=True, text=True, timeout=300
    )
    assert built.returncode == 0, built.stderr[-3000:]
    write_manifest(kept)
    write_report(kept)
    code, summary = publish_to_hub(maxtext_python, hub, kept, token_file)
    assert code == 0, summary

    def load(home: str, token: str | None) -> subprocess.CompletedProcess:
        offline = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN", "HF_TOKEN_PATH")
        reader = {k: v for k, v in os.environ.items() if k not in offline}
        reader.update(HF_ENDPOINT=hub.endpoint, HF_HOME=str(tmp_path / home), HF_HUB_DISABLE_TELEMETRY="1")
        reader.update({"HF_TOKEN": token} if token else {})
        argv = [maxtext_python, "-c", LOAD, str(kept / "hf-model")]
        return subprocess.run(argv, env=reader, capture_output=True, text=True, timeout=300)

    loaded = load("reader", WRITE_TOKEN)
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    print(loaded.stdout.strip().splitlines()[-1])  # the loading info, for the record (pytest -s)
    assert json.loads(loaded.stdout.strip().splitlines()[-1]) == {
        "model": "Gemma3ForCausalLM",
        "model_type": "gemma3_text",
        "missing_keys": [],
        "unexpected_keys": [],
        "mismatched_keys": [],
        "error_msgs": [],
        "same_logits": True,
    }
    published_load = loaded.stderr.split(EXPORT_FOLLOWS)[0]
    assert "MISSING" not in published_load and "newly initialized" not in published_load  # no missing-weights report
    # The weights came by LFS from a presigned URL on another host, which the client sent no token.
    fetched = [r for r in hub.requests if r["method"] == "GET" and r["path"].startswith("/lfs-files/")]
    assert fetched and all("authorization" not in r["headers"] for r in fetched)

    anonymous = load("anonymous", None)  # the repo is private
    assert anonymous.returncode != 0 and "team/gemma-sft" in anonymous.stderr
    assert WRITE_TOKEN not in loaded.stderr + anonymous.stderr


FILE_DATA = "gs://acme-private-stack-bucket/data/5f0c1e/chats.jsonl"  # a local file, as `pulumi up` copies it
REFUSED_CARD = """
import sys
from huggingface_hub import CommitOperationAdd, HfApi
card = b"---\\nlicense: gemma\\ndatasets:\\n- " + sys.argv[1].encode() + b"\\n---\\n\\n# a card\\n"
api = HfApi(token=open(sys.argv[2]).read().strip())
api.create_repo("team/old-card", exist_ok=True)
try:
    api.create_commit("team/old-card", [CommitOperationAdd("README.md", card)], commit_message="old card")
except ValueError as error:
    print(str(error).replace("\\n", " | "))
"""


def test_a_model_trained_on_its_own_files_publishes_with_no_bucket_path_in_its_card(
    maxtext_python, hub, kept, token_file
):
    """The Hub refuses `datasets: [gs://…]` (the stand-in as the Hub answers; tests/hub_upload_standin.py):
    huggingface_hub's own create_commit is refused such a card before anything is uploaded, and the card tpu-sft
    writes names the files by name, rows and sha256 instead, and passes."""
    env = {**os.environ, "HF_ENDPOINT": hub.endpoint, "PYTHONPATH": str(REPO), "HF_HUB_DISABLE_TELEMETRY": "1"}
    refused = subprocess.run(
        [maxtext_python, "-c", REFUSED_CARD, FILE_DATA, str(token_file)], env=env, capture_output=True, text=True
    )
    assert refused.stdout.strip() == (
        f'Invalid metadata in README.md. | - "datasets[0]" with value "{FILE_DATA}" is not valid. '
        "If possible, use a dataset id from https://hf.co/datasets."
    ), refused.stderr[-2000:]
    assert "team/old-card" in hub.repos and hub.commits == []  # nothing committed

    data = {"files": [{"name": "chats.jsonl", "rows": 1234, "sha256": "ab" * 32, "bytes": 5678}]}
    write_manifest(kept, {**SETTINGS, "dataset": FILE_DATA}, data=data)
    code, summary = publish_to_hub(maxtext_python, hub, kept, token_file)
    assert code == 0, summary
    card = hub.content("team/gemma-sft", "README.md").decode()
    assert "acme-private-stack-bucket" not in card and "datasets:" not in card
    assert f"| `chats.jsonl` | 1234 | `{'ab' * 32}` |" in card


# The quality gate (workload/eval/gate.py), read before anything is sent: the kept model's eval/report.json, as the
# eval step writes it (here made by workload/eval/compare.py from per-sample scores: tests/workload/eval/reports.py).
WORSE = comparisons(610)  # GSM8K 0.71 → 0.61: ten points down, beyond the 2-point margin


def test_a_fine_tune_worse_than_its_base_is_refused_in_one_line_and_nothing_is_sent(maxtext_python, gcs, kept):
    write_report(kept, WORSE)
    code, summary = publish(maxtext_python, gcs, kept, "--gcs", "gs://models/m")
    assert code == 2 and summary["ok"] is False
    error = summary["error"]
    assert "\n" not in error
    assert error.startswith("not published: the fine-tuned model is worse than its base beyond the 2-point margin on ")
    assert "GSM8K 0.71 → 0.61 (−10.0 ± " in error and f"(report: {kept}/eval/report.json)" in error
    assert error.endswith("pulumi config set tpu-sft:evalGate warn, then pulumi up (nothing is trained again)")
    assert summary["gate"]["blocked"] is True and summary["published"] == {}
    assert objects(gcs) == {}
    assert (kept / "hf-model" / "model.safetensors").is_file()  # the kept model stays

    code, summary = publish(maxtext_python, gcs, kept, "--gcs", "gs://models/m", "--eval-gate", "warn")
    assert code == 0, summary
    assert summary["gate"]["line"].startswith("published with tpu-sft:evalGate warn, although the fine-tuned model")
    assert "GSM8K 0.71 → 0.61" in summary["gate"]["line"]
    assert "m/model.safetensors" in objects(gcs)


def test_a_wider_margin_or_the_gate_off_publishes_the_same_model(maxtext_python, gcs, kept):
    write_report(kept, WORSE)
    code, summary = publish(maxtext_python, gcs, kept, "--gcs", "gs://models/m", "--eval-margin", "15")
    assert code == 0 and summary["gate"]["line"].startswith("eval gate passed (15-point margin): IFEval strict")
    (kept / "eval" / "report.json").write_text("{cut short")
    code, summary = publish(maxtext_python, gcs, kept, "--gcs", "gs://models/m", "--eval-gate", "off")
    assert code == 0 and summary["gate"]["line"] == "eval gate off: published without reading the eval report"


def test_a_kept_model_with_no_eval_report_is_refused_where_the_gate_blocks(maxtext_python, gcs, kept):
    (kept / "eval" / "report.json").unlink()
    code, summary = publish(maxtext_python, gcs, kept, "--gcs", "gs://models/m")
    assert code == 2 and summary["error"].startswith(
        f"not published: the kept model has no eval report ({kept}/eval/report.json): its eval did not run"
    )
    assert objects(gcs) == {}
    code, summary = publish(maxtext_python, gcs, kept, "--gcs", "gs://models/m", "--eval-margin", "-1")
    assert code == 2 and summary["error"] == "--eval-margin -1 is out of range: give points from 0 to 100"


def test_hub_a_blocked_publish_creates_no_repo_and_commits_nothing(maxtext_python, hub, kept, token_file):
    write_report(kept, WORSE)
    code, summary = publish_to_hub(maxtext_python, hub, kept, token_file)
    assert code == 2 and "GSM8K 0.71 → 0.61" in summary["error"]
    assert hub.repos == {} and hub.commits == []
    code, summary = publish_to_hub(maxtext_python, hub, kept, token_file, "--eval-gate", "warn")
    assert code == 0 and hub.commits and hub.commits[0][0] == "team/gemma-sft"
