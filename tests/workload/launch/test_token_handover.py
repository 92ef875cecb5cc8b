"""How the runner hands the HF token to MaxText: as a 0600 file named by HF_TOKEN_PATH, never as HF_TOKEN (which
MaxText 0.2.3's pyconfig copies into the config it writes to TensorBoard), and that the libraries MaxText calls
with `token=None` find it there. (test_token_lost_vm.py shows the effect on a real training run.)"""

from __future__ import annotations

import hashlib
import json
import os
import stat
import subprocess
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from workload import __main__ as cli
from workload.launch.hf_token import REDACTED

TOKEN = "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"
PROBE = """
import hashlib, json, os, stat, sys
path = os.environ.get("HF_TOKEN_PATH")
seen = {"HF_TOKEN": os.environ.get("HF_TOKEN"), "HUGGING_FACE_HUB_TOKEN": os.environ.get("HUGGING_FACE_HUB_TOKEN"),
        "path": path}
if path:
    seen["mode"] = stat.S_IMODE(os.stat(path).st_mode)
    seen["dir_mode"] = stat.S_IMODE(os.stat(os.path.dirname(path)).st_mode)
    seen["sha256"] = hashlib.sha256(open(path, "rb").read()).hexdigest()
    print("the child read", open(path).read())
json.dump(seen, open(sys.argv[1], "w"))
"""


@pytest.fixture
def runner_children(monkeypatch, tmp_path):
    """Runs `python -m workload run` with the pipeline replaced by one probe child started the way every MaxText
    step is (Context.run); returns what the child saw, the context, and the probe's log."""

    def run(*extra: str) -> tuple[dict, object, str]:
        seen_file, captured = tmp_path / "seen.json", {}

        def probe_pipeline(context, until, summaries_at, boot_resume):
            context.run("probe", [sys.executable, "-c", PROBE, str(seen_file)])
            captured["context"] = context
            return 0

        monkeypatch.setattr(cli, "run", probe_pipeline)
        config = tmp_path / "settings.json"
        config.write_text(json.dumps({"profile": "tiny"}))
        assert (
            cli.main(
                [
                    "run",
                    "--config",
                    str(config),
                    "--work-dir",
                    str(tmp_path / "work"),
                    "--output-dir",
                    str(tmp_path / "out"),
                    *extra,
                ]
            )
            == 0
        )
        context = captured["context"]
        (log,) = context.log_paths
        return json.loads(seen_file.read_text()), context, open(log).read()

    return run


def sha256(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def test_a_token_file_is_named_to_maxtext_by_its_absolute_path_and_no_token_variable_reaches_it(
    runner_children, monkeypatch, tmp_path
):
    secrets, code = tmp_path / "state" / "secrets", tmp_path / "state" / "code"
    secrets.mkdir(parents=True)
    code.mkdir()
    (secrets / "hf_token").write_text(TOKEN + "\n")
    (secrets / "hf_token").chmod(0o600)
    monkeypatch.setenv("HF_TOKEN", "hf_SomeOtherTokenInTheShell")
    monkeypatch.setenv("HUGGING_FACE_HUB_TOKEN", "hf_AnOlderNameForIt")
    monkeypatch.chdir(code)  # a job starts in the code dir and names the secret relatively (remote/pipeline/claim.py)
    seen, context, log = runner_children("--hf-token-file", "../secrets/hf_token")
    assert seen["HF_TOKEN"] is None and seen["HUGGING_FACE_HUB_TOKEN"] is None
    assert seen["path"] == str(secrets / "hf_token")
    assert context.token == TOKEN  # still masked out of TensorBoard files, and out of logs
    assert f"the child read {REDACTED}" in log and TOKEN not in log


def test_a_token_from_the_environment_is_handed_over_as_a_private_temporary_file_outside_the_run(
    runner_children, monkeypatch, tmp_path
):
    monkeypatch.setenv("HF_TOKEN", TOKEN)
    seen, context, log = runner_children()
    assert seen["HF_TOKEN"] is None
    assert seen["mode"] == 0o600 and seen["dir_mode"] == 0o700 and seen["sha256"] == sha256(TOKEN)
    assert not seen["path"].startswith(str(tmp_path))  # not in the work or output dir: nothing uploads it
    assert not os.path.exists(os.path.dirname(seen["path"]))  # removed when the run ends
    assert context.token == TOKEN and TOKEN not in log


def test_without_a_token_no_token_file_is_named(runner_children, monkeypatch):
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.delenv("HF_TOKEN_PATH", raising=False)
    seen, context, _ = runner_children()
    assert seen["path"] is None and context.token is None


class RecordingHub:
    """Answers every request 401, as the Hub answers a gated repo without the right token, and records each
    request's path and Authorization header: enough to see what token each library sent, not a Hub."""

    def __init__(self) -> None:
        self.requests: list[tuple[str, str | None]] = []
        hub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args) -> None:
                pass

            def _refuse(self) -> None:
                hub.requests.append((self.path, self.headers.get("Authorization")))
                self.send_response(401)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", "2")
                self.end_headers()
                if self.command != "HEAD":
                    self.wfile.write(b"{}")

            do_GET = do_HEAD = do_POST = _refuse

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"


# Each call is the library call MaxText 0.2.3 makes with `token=config.hf_access_token`, which is None when the key
# is unset (configs/pyconfig.py `_prepare_for_pydantic` turns base.yml's '' into None).
LIBRARY_CALLS = """
import sys
calls = {
    # input_pipeline/hf_data_processing.py preprocessing_pipeline (train_sft's tokenizer);
    # checkpoint_conversion/to_huggingface.py main (the export's tokenizer)
    "tokenizer": lambda: __import__("transformers").AutoTokenizer.from_pretrained("google/gemma-3-4b-it", token=None),
    # input_pipeline/hf_data_processing.py make_hf_train_iterator (train_sft's dataset, hf_path)
    "dataset": lambda: __import__("datasets").load_dataset("HuggingFaceH4/ultrachat_200k", split="train_sft",
                                                           token=None),
    # checkpoint_conversion/utils/utils.py load_hf_dict_from_transformers (to_maxtext, eager_load_method=transformers)
    "weights": lambda: __import__("transformers").AutoModelForCausalLM.from_pretrained("google/gemma-3-4b-it",
                                                                                     token=None),
    # checkpoint_conversion/utils/utils.py load_hf_dict_from_safetensors (to_maxtext, safetensors)
    "snapshot": lambda: __import__("huggingface_hub").snapshot_download("google/gemma-3-4b-it", token=None),
}
name = sys.argv[1]
try:
    calls[name]()
except Exception as error:
    print(name, "failed as expected:", type(error).__name__)
else:
    sys.exit(f"{name} succeeded against a hub that refuses everything")
"""


@pytest.mark.parametrize("call", ["tokenizer", "dataset", "weights", "snapshot"])
def test_the_libraries_maxtext_calls_without_a_token_send_the_one_in_the_hf_token_path_file(
    maxtext_python, tmp_path, call
):
    hub = RecordingHub()
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN)
    token_file.chmod(0o600)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING_FACE_"))}
    env.update(
        HF_ENDPOINT=hub.url,
        HF_HOME=str(tmp_path / "hf-home"),
        HF_TOKEN_PATH=str(token_file),
        HF_HUB_ETAG_TIMEOUT="5",
        HF_HUB_DOWNLOAD_TIMEOUT="5",
    )
    try:
        done = subprocess.run(
            [maxtext_python, "-c", LIBRARY_CALLS, call],
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
        )
    finally:
        hub.server.shutdown()
    assert done.returncode == 0, done.stderr[-2000:]
    assert hub.requests, f"{call} asked the hub nothing"
    assert {auth for _, auth in hub.requests} == {f"Bearer {TOKEN}"}, hub.requests
    assert stat.S_IMODE(os.stat(token_file).st_mode) == 0o600  # read, never rewritten
