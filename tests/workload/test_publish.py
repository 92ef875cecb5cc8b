"""Publishing a kept model to Cloud Storage and the Hugging Face Hub: verified against its manifest, a re-publish
of the same model sends nothing, an interrupted upload resumes without sending again what arrived.

Against gcp-storage-emulator (PyPI): a real local server of the Cloud Storage JSON API, reached by the MaxText
venv's google-cloud-storage through STORAGE_EMULATOR_HOST, as `python -m workload.publish` runs on the VM. The
"model" is a small directory laid out like a kept export, with its manifest as `keep` writes it.
"""

from __future__ import annotations

import json
import os
import subprocess
import urllib.request
from pathlib import Path

import pytest

from rehearsal import gcs_emulator
from rehearsal.gcs_emulator import storage_emulator
from tests.workload.hub_upload_standin import HubStandin
from workload.run.fingerprint import manifest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def gcs():
    with storage_emulator() as host:
        yield host


def objects(host: str, bucket: str = "models") -> dict[str, dict]:
    with urllib.request.urlopen(f"{host}/storage/v1/b/{bucket}/o") as response:
        return {o["name"]: o for o in json.load(response).get("items", [])}


@pytest.fixture
def kept(tmp_path) -> Path:
    """A kept model as `keep` leaves it: the export, the loss curve, verify.json, and manifest.json."""
    model = tmp_path / "gemma3-4b-sft-0123456789ab"
    (model / "hf-model").mkdir(parents=True)
    (model / "hf-model" / "config.json").write_text('{"model_type": "gemma3"}')
    (model / "hf-model" / "model.safetensors").write_bytes(os.urandom(300_000))
    (model / "loss.png").write_bytes(os.urandom(2_000))
    (model / "verify.json").write_text('{"ok": true}')
    files = manifest(str(model), hashes=True)
    (model / "manifest.json").write_text(json.dumps({"run_name": model.name, "files": files}, indent=1))
    return model


def publish(maxtext_python: str, host: str, model: Path | str, *extra: str) -> tuple[int, dict]:
    env = {**os.environ, "STORAGE_EMULATOR_HOST": host, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [maxtext_python, "-m", "workload.publish", str(model), *extra],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    return done.returncode, json.loads(done.stdout.strip().splitlines()[-1])


def test_publish_uploads_every_file_then_the_manifest(maxtext_python, gcs, kept):
    code, summary = publish(maxtext_python, gcs, kept, "--gcs", "gs://models/team/gemma-sft")
    assert code == 0, summary
    result = summary["published"]["gs://models/team/gemma-sft"]
    assert result == {
        "unchanged": False,
        "skipped": 0,
        "uploaded": [  # in the manifest's order
            "loss.png",
            "verify.json",
            "hf-model/config.json",
            "hf-model/model.safetensors",
        ],
    }
    stored = objects(gcs)
    assert set(stored) == {f"team/gemma-sft/{p}" for p in (*result["uploaded"], "manifest.json")}
    for entry in json.loads((kept / "manifest.json").read_text())["files"]:
        blob = stored[f"team/gemma-sft/{entry['path']}"]
        assert (int(blob["size"]), blob["metadata"]["sha256"]) == (entry["size"], entry["sha256"])


def test_publishing_the_same_model_again_sends_nothing(maxtext_python, gcs, kept):
    publish(maxtext_python, gcs, kept, "--gcs", "gs://models/m")
    before = {name: o["generation"] for name, o in objects(gcs).items()}
    code, summary = publish(maxtext_python, gcs, kept, "--gcs", "gs://models/m")
    assert code == 0
    assert summary["published"]["gs://models/m"] == {"unchanged": True, "uploaded": [], "skipped": 4}
    assert {name: o["generation"] for name, o in objects(gcs).items()} == before  # nothing rewritten


# An upload that breaks at its third file, as a dropped link would break it: the real client and emulator,
# with the break injected into the destination.
BREAKING_UPLOAD = """
import sys
from workload.publish.__main__ import load_manifest, publish
from workload.publish.gcs import GcsDestination

class Breaks(GcsDestination):
    sent = 0
    def upload(self, local_path, entry):
        if self.sent == 2:
            raise ConnectionResetError("link dropped")
        super().upload(local_path, entry)
        self.sent += 1

data, files = load_manifest(sys.argv[1])
publish(sys.argv[1], Breaks(sys.argv[2]), data, files)
"""


def test_an_interrupted_upload_resumes(maxtext_python, gcs, kept):
    env = {**os.environ, "STORAGE_EMULATOR_HOST": gcs, "PYTHONPATH": str(REPO)}
    broken = subprocess.run(
        [maxtext_python, "-c", BREAKING_UPLOAD, str(kept), "gs://models/m"],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert "ConnectionResetError: link dropped" in broken.stderr
    assert set(objects(gcs)) == {"m/loss.png", "m/verify.json"}  # two files up, no manifest
    code, summary = publish(maxtext_python, gcs, kept, "--gcs", "gs://models/m")
    assert code == 0
    assert summary["published"]["gs://models/m"] == {
        "unchanged": False,
        "skipped": 2,
        "uploaded": ["hf-model/config.json", "hf-model/model.safetensors"],
    }
    with urllib.request.urlopen(f"{gcs}/download/storage/v1/b/models/o/m%2Fmanifest.json?alt=media") as response:
        assert response.read() == (kept / "manifest.json").read_bytes()


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
    files = manifest(str(kept), hashes=True)
    files = [f for f in files if f["path"] != "manifest.json"]
    (kept / "manifest.json").write_text(json.dumps({"run_name": kept.name, "files": files}, indent=1))
    code, summary = publish(maxtext_python, gcs, kept, "--gcs", "gs://models/m")
    assert code == 0 and summary["published"]["gs://models/m"]["uploaded"] == ["verify.json"]


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
        assert len(summary["published"]["gs://models/team/gemma-sft"]["uploaded"]) == 4
        stored = objects(emulator.url)
        for entry in json.loads((kept / "manifest.json").read_text())["files"]:
            blob = stored[f"team/gemma-sft/{entry['path']}"]
            assert (int(blob["size"]), blob["metadata"]["sha256"]) == (entry["size"], entry["sha256"])
        assert list(staging.iterdir()) == []  # the copy is removed once published

        (kept / "hf-model" / "model.safetensors").write_bytes(os.urandom(300_000))  # not what was kept
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
# Hub's upload API (tests/workload/hub_upload_standin.py), since the Hub itself cannot be reached from here.
WRITE_TOKEN = "hf_" + "Wr1teT0ken" * 4


@pytest.fixture
def hub():
    with HubStandin(token=WRITE_TOKEN) as standin:
        yield standin


@pytest.fixture
def token_file(tmp_path) -> Path:
    path = tmp_path / "hf_write_token"
    path.write_text(WRITE_TOKEN + "\n")
    path.chmod(0o600)
    return path


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


def test_hub_publish_creates_a_private_repo_and_sends_every_file_manifest_last(maxtext_python, hub, kept, token_file):
    code, summary = publish_to_hub(maxtext_python, hub, kept, token_file)
    assert code == 0, summary
    assert summary["published"]["hf://team/gemma-sft"]["uploaded"] == [
        "loss.png",
        "verify.json",
        "hf-model/config.json",
        "hf-model/model.safetensors",
    ]
    assert hub.repos["team/gemma-sft"]["private"] is True
    assert [paths for _, paths in hub.commits][-1] == ["manifest.json"]  # last: a repo with it is complete
    for name in ("hf-model/model.safetensors", "hf-model/config.json", "manifest.json"):
        assert hub.content("team/gemma-sft", name) == (kept / name).read_bytes()
    assert "lfs" in hub.repos["team/gemma-sft"]["files"]["hf-model/model.safetensors"]  # the big one went by LFS
    # The token travelled only as the bearer token of each API request (the LFS PUTs go to presigned URLs, as on
    # the Hub, and carry none), never in a URL or a body.
    for request in hub.requests:
        presigned = request["path"].startswith("/lfs-upload/")
        expected = None if presigned else f"Bearer {WRITE_TOKEN}"
        assert request["headers"].get("authorization") == expected, request["path"]
        assert WRITE_TOKEN not in request["path"] + request["body"]


def test_hub_republishing_the_same_model_commits_nothing(maxtext_python, hub, kept, token_file):
    publish_to_hub(maxtext_python, hub, kept, token_file)
    commits = len(hub.commits)
    code, summary = publish_to_hub(maxtext_python, hub, kept, token_file)
    assert code == 0 and summary["published"]["hf://team/gemma-sft"]["unchanged"] is True
    assert len(hub.commits) == commits


def test_hub_upload_that_failed_midway_resumes(maxtext_python, hub, kept, token_file):
    hub.refuse_commits_after = 2  # the Hub fails from the third commit on
    code, summary = publish_to_hub(maxtext_python, hub, kept, token_file)
    assert code == 1 and "500" in summary["error"] and WRITE_TOKEN not in summary["error"]
    assert "manifest.json" not in hub.repos["team/gemma-sft"]["files"]
    hub.refuse_commits_after = None
    code, summary = publish_to_hub(maxtext_python, hub, kept, token_file)
    assert code == 0
    assert summary["published"]["hf://team/gemma-sft"] == {
        "unchanged": False,
        "skipped": 2,
        "uploaded": ["hf-model/config.json", "hf-model/model.safetensors"],
    }


def test_hub_public_only_when_asked_and_a_wrong_token_is_refused(maxtext_python, hub, kept, token_file, tmp_path):
    publish_to_hub(maxtext_python, hub, kept, token_file, "--public")
    assert hub.repos["team/gemma-sft"]["private"] is False
    wrong = tmp_path / "wrong"
    wrong.write_text("hf_" + "n0tTheT0ken" * 3)
    wrong.chmod(0o600)
    code, summary = publish_to_hub(maxtext_python, hub, kept, wrong)
    assert code == 1 and "401" in summary["error"] and "n0tTheT0ken" not in summary["error"]
