"""The server the eval phase asks for completions, in ONE place: what serves each model, with which arguments, and
how it is started, waited for and stopped. Both models are served the same way, one after the other, on loopback.

On a VM: vLLM TPU (`vllm-tpu`, pinned with lm-eval in workload/eval-requirements.txt and installed by bootstrap in a
venv of its own, remote/pipeline/bootstrap/seed.py), serving the base model by its Hub id at the revision bootstrap
downloaded, then the fine-tuned export from the kept model's folder, each with its own tokenizer's chat template.
**Unproven**: no real run has served a model with these arguments yet (docs/eval.md, "What no test here proves");
the eval step says so in its first lines on a VM, and the first real run proves or corrects them here.

In the rehearsal and the tests (the tiny profile): `workload.eval.chat_server`, an OpenAI-compatible stand-in that
generates with transformers through the project's own generation path (workload/measure/samples.py), since vLLM TPU
cannot be installed off a TPU host.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass

VLLM_TPU_VERSION = "0.26.0"  # the pin in workload/eval-requirements.txt (tests/workload/eval checks they agree)
UNPROVEN = (
    f"vLLM TPU {VLLM_TPU_VERSION} with these arguments has not served a model on a TPU yet (docs/eval.md): "
    "this run is the first to try"
)
HOST = "127.0.0.1"  # loopback only: nothing outside the VM reaches the server
READY_TIMEOUT_S = {"vllm": 1800.0, "chat_server": 300.0}  # vLLM loads and compiles the model before it answers
STOP_GRACE_S = 30.0
# What lm-eval sends to the server and what it reads back (the same for both models; part of the base cache's key).
MAX_MODEL_LEN = 8192  # IFEval asks for up to 1,280 new tokens; GSM8K's 5-shot prompts stay well under this


@dataclass(frozen=True)
class Served:
    """One model to serve: its server's argv and environment, and the name lm-eval addresses it by."""

    kind: str  # "vllm" or "chat_server"
    argv: tuple[str, ...]
    env: dict[str, str]
    name: str
    port: int

    @property
    def base_url(self) -> str:
        """lm-eval's `local-chat-completions` posts to this URL as given."""
        return f"http://{HOST}:{self.port}/v1/chat/completions"

    @property
    def models_url(self) -> str:
        """What answers once the model is loaded (both servers list it there)."""
        return f"http://{HOST}:{self.port}/v1/models"


def free_port() -> int:
    """A port nothing listens on now (the kernel's pick); the server binds it right after."""
    with socket.socket() as probe:
        probe.bind((HOST, 0))
        return probe.getsockname()[1]


def vllm(python: str, model: str, *, name: str, revision: str | None, chips: int) -> Served:
    """vLLM's OpenAI-compatible server for `model` (a Hub id, then the export's directory) over all the host's
    chips. `--generation-config vllm`: vLLM's own sampling defaults, not the model's generation_config.json, so
    that the base and the export (whose files may differ there) are asked the same; lm-eval's requests set the
    temperature (0: greedy) and the stop strings themselves."""
    port = free_port()
    argv = [python, "-m", "vllm.entrypoints.openai.api_server", "--model", model, "--served-model-name", name]
    argv += ["--host", HOST, "--port", str(port), "--tensor-parallel-size", str(chips)]
    argv += ["--max-model-len", str(MAX_MODEL_LEN), "--generation-config", "vllm", "--seed", "0"]
    if revision is not None:
        argv += ["--revision", revision]
    return Served("vllm", tuple(argv), {}, name, port)


def chat_server(python: str, model_dir: str, *, name: str) -> Served:
    """The rehearsal's stand-in (workload/eval/chat_server.py) for a local model directory."""
    port = free_port()
    argv = (python, "-m", "workload.eval.chat_server", model_dir, "--name", name, "--host", HOST, "--port", str(port))
    return Served("chat_server", argv, {}, name, port)


@contextlib.contextmanager
def serving(served: Served, base_env: dict[str, str], log_path: str, cwd: str) -> Iterator[int]:
    """Starts the server and yields its pid at once: lm-eval imports while the model loads, then waits for the server
    itself (workload/eval/lm_eval_offline.py `--wait-for`). Stops it on the way out (SIGTERM, then SIGKILL after
    STOP_GRACE_S). Its output goes to `log_path` only."""
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    with open(log_path, "ab") as log:
        process = subprocess.Popen(
            served.argv,
            env={**base_env, **served.env},
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    try:
        yield process.pid
    finally:
        process.terminate()
        try:
            process.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
