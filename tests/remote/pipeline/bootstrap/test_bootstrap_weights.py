"""The seed spec's `weights` step: the model's download beside the install. It runs the real `hf download`
(huggingface_hub's CLI, in a uv tool environment, exactly as the step's command says) against a stand-in for
the Hugging Face Hub (tests/hub_download_standin.py: no Hub access here), with the token read from the file
`put-secret` writes; and what it leaves is what a later `from_pretrained` finds with no network at all.

The step's command runs under /bin/sh on this machine as bootstrap runs it on a host; how bootstrap runs steps
over SSH is tested in test_bootstrap.py. Here its `$HOME/.local/bin/uv` is the project's own uv and
uv's Python 3.12 (the `python` step's) is pyenv's.
"""

import importlib.util
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from remote.pipeline.bootstrap.scheduler import bootstrap_all
from remote.pipeline.bootstrap.seed import spec_for
from remote.pipeline.bootstrap.spec import BootstrapSpec
from remote.ssh.connection import connect, run
from tests.hub_download_standin import serving
from workload.core import lock
from workload.core.config import PipelineConfig
from workload.core.contract import HF_TOKEN_SECRET
from workload.core.models import MODELS

pytestmark = pytest.mark.maxtext  # the step's Python 3.12 and Hub client are MaxText's (.maxtext-venv)

ROOT = Path(__file__).resolve().parents[4]
# Read at import, so it must not fail where pyenv is absent (a non-root user collecting the fast tier).
PYTHON_312 = (
    Path(
        (shutil.which("pyenv") and subprocess.run(["pyenv", "root"], capture_output=True, text=True).stdout.strip())
        or Path.home() / ".pyenv"
    )
    / "versions/3.12.1/bin"
)
TOKEN = "hf_weightsStepToken0123456789abcdef"
REPO = MODELS["gemma3-4b"].hub_id
FILES = {
    "config.json": b'{"model_type": "gemma3"}',
    "model-00001-of-00001.safetensors": os.urandom(1 << 20),
    "tokenizer.json": b'{"version": "1.0"}',
}


def _weights_step(tmp_path: Path) -> str:
    [step] = [
        s
        for s in spec_for(PipelineConfig(), work_dir=str(tmp_path / "work"), state_dir=str(tmp_path / "state")).steps
        if s.name == "weights"
    ]
    return step.command


def _run_step(command: str, tmp_path: Path, endpoint: str) -> subprocess.CompletedProcess:
    home = tmp_path / "home"
    (home / ".local/bin").mkdir(parents=True, exist_ok=True)
    if not (home / ".local/bin/uv").exists():
        (home / ".local/bin/uv").symlink_to(Path(sys.executable).parent / "uv")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HF_")}
    env.update(
        HOME=str(home),
        HF_ENDPOINT=endpoint,
        PATH=f"{PYTHON_312}:{env['PATH']}",
        UV_PYTHON_DOWNLOADS="never",
        UV_CACHE_DIR=os.environ.get("UV_CACHE_DIR", str(Path.home() / ".cache/uv")),
    )
    return subprocess.run(["/bin/sh", "-c", command], env=env, cwd=home, capture_output=True, text=True, timeout=600)


def _put_token(tmp_path: Path, value: str) -> None:
    secrets = tmp_path / "state/secrets"
    secrets.mkdir(parents=True, exist_ok=True)
    (secrets / HF_TOKEN_SECRET).write_text(value)
    (secrets / HF_TOKEN_SECRET).chmod(0o600)


def test_the_weights_land_in_the_cache_to_maxtext_reads_with_the_token_from_its_file(tmp_path):
    command = _weights_step(tmp_path)
    _put_token(tmp_path, TOKEN)
    with serving(REPO, FILES, token=TOKEN) as hub:
        done = _run_step(command, tmp_path, hub.endpoint)
    assert done.returncode == 0, done.stderr[-2000:]
    assert hub.requests and {r.authorization for r in hub.requests} == {f"Bearer {TOKEN}"}
    hf_home = tmp_path / "work/hf-home"
    snapshot = hf_home / "hub" / f"models--{REPO.replace('/', '--')}" / "snapshots" / hub.commit
    assert {name: (snapshot / name).read_bytes() for name in FILES} == FILES
    assert TOKEN not in command and TOKEN not in done.stdout + done.stderr
    # What to_maxtext's from_pretrained resolves the repo id to, the Hub gone: the downloaded files.
    offline = subprocess.run(
        [
            ROOT / ".maxtext-venv/bin/python",
            "-c",
            f"import huggingface_hub as h; print(h.hf_hub_download({REPO!r}, 'config.json'))",
        ],
        env={"PATH": os.environ["PATH"], "HF_HOME": str(hf_home), "HF_HUB_OFFLINE": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert offline.returncode == 0, offline.stderr[-1500:]
    assert offline.stdout.strip() == str(snapshot / "config.json")


def test_with_no_token_on_the_host_the_step_says_how_to_give_one_and_asks_the_hub_nothing(tmp_path):
    with serving(REPO, FILES, token=TOKEN) as hub:
        done = _run_step(_weights_step(tmp_path), tmp_path, hub.endpoint)
    assert done.returncode != 0 and hub.requests == []
    said = done.stderr.strip().splitlines()[-1]
    assert "no HF token" in said and "export HF_TOKEN" in said and f"put-secret {HF_TOKEN_SECRET}" in said


def test_a_refused_token_fails_the_step_with_the_hubs_reason(tmp_path):
    _put_token(tmp_path, "hf_notTheRightOne0123456789abcdef")
    with serving(REPO, FILES, token=TOKEN) as hub:
        done = _run_step(_weights_step(tmp_path), tmp_path, hub.endpoint)
    assert done.returncode != 0
    assert "401" in done.stderr and "Invalid credentials" in done.stderr
    assert not (tmp_path / "work/hf-home/hub" / f"models--{REPO.replace('/', '--')}" / "snapshots").exists()


def test_the_step_is_on_the_full_profile_only_and_starts_once_python_is_there():
    full = {s.name: s for s in spec_for(PipelineConfig()).steps}
    assert full["weights"].after == ("python",)  # beside venv → MaxText and apt
    assert "weights" not in {s.name for s in spec_for(PipelineConfig(profile="tiny")).steps}
    other = {s.name: s for s in spec_for(PipelineConfig(model="gemma3-12b")).steps}
    assert "hf download google/gemma-3-12b-it" in other["weights"].command
    # Another model re-runs the download only: every other step keeps its hash.
    unchanged = dict(zip(full, spec_for(PipelineConfig()).step_hashes(), strict=True))
    changed = dict(zip(other, spec_for(PipelineConfig(model="gemma3-12b")).step_hashes(), strict=True))
    assert {name for name in full if unchanged[name] != changed[name]} == {"weights"}


def test_the_hub_client_and_the_repositories_are_the_ones_pinned_with_maxtext(tmp_path):
    client = [f"{name}=={lock.versions()[name]}" for name in ("huggingface-hub", "hf-xet", "typer")]
    assert f"--from {client[0]} --with {client[1]} --with {client[2]} hf download" in _weights_step(tmp_path)
    # The installed MaxText's own table, read from its file: importing the module would import all of MaxText
    # (its package __init__), ~30 s for one dict. The file imports only os.path.
    (path,) = (ROOT / ".maxtext-venv/lib").glob("python3.*/site-packages/maxtext/utils/globals.py")
    spec = importlib.util.spec_from_file_location("maxtext_globals", path)
    assert spec is not None and spec.loader is not None
    maxtext_globals = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(maxtext_globals)
    assert {name: model.hub_id for name, model in MODELS.items()} == {
        name: maxtext_globals.HF_IDS[name] for name in MODELS
    }


def test_bootstrap_puts_the_token_on_the_host_before_any_step(target):
    """With `$HF_TOKEN` and no `hf-token` task, bootstrap is the first to need it on the host."""
    token_file = shlex.quote(f"{target.state_dir}/secrets/{HF_TOKEN_SECRET}")
    check = {"steps": [{"name": "sees-token", "command": f"test -s {token_file}"}]}
    results = bootstrap_all(target, BootstrapSpec.from_mapping(check), hf_token=TOKEN)
    assert getattr(results[target.host], "steps_run", results[target.host]) == ("sees-token",)
    with connect(target) as conn:
        mode = run(conn, f"stat -c %a {token_file}").stdout.strip()
    assert mode == "600"
