"""The seed's install (shared/seed/README.md, step 3) as a bootstrap spec, with the pins it installs and the
shell commands its steps are made of."""

from __future__ import annotations

import shlex

from remote.pipeline.bootstrap.spec import BootstrapSpec, Step
from remote.ssh.secrets import secret_file
from workload.core import lock
from workload.core.config import PipelineConfig
from workload.core.contract import HF_TOKEN_SECRET, SCRATCH_DIR, STATE_DIR
from workload.core.models import MODELS
from workload.run.layout import hf_home

UV = "$HOME/.local/bin/uv"  # where astral's installer puts uv
UV_VERSION = "0.13.9"  # the uv this project's own venv pins (requirements.txt)
UV_INSTALLER = f"https://astral.sh/uv/{UV_VERSION}/install.sh"  # astral's installer for exactly that version
# A first boot's apt-daily / unattended-upgrades hold dpkg's lock for minutes: wait for it instead of failing,
# and never stop at a prompt (a changed config file keeps the local version, or the package default). LC_ALL=C:
# the lock message `apt_update` looks for is apt's English one.
APT_LOCK_WAIT_S = 900
APT_GET = (
    "sudo",
    "env",
    "LC_ALL=C",
    "DEBIAN_FRONTEND=noninteractive",
    "apt-get",
    "-q",
    "-o",
    f"DPkg::Lock::Timeout={APT_LOCK_WAIT_S}",
    "-o",
    "Dpkg::Options::=--force-confdef",
    "-o",
    "Dpkg::Options::=--force-confold",
)
VENV = "maxtext_venv"  # relative to the home directory, as in the seed
# The eval phase's venv (workload/eval/, docs/eval.md): vLLM TPU and lm-eval, pinned by workload/eval-requirements.txt,
# apart from MaxText's (their JAX and torch pins differ), with NLTK's punkt_tab, which IFEval needs, inside it.
EVAL_VENV = "eval_venv"
EVAL_CONSTRAINTS = "tpu-sft-constraints.txt"  # in the eval venv: the lock, as uv's --constraint
OVERRIDES_FILE = "tpu-sft-overrides.txt"  # in the venv: the lock's overrides of what MaxText and Tunix ask for
# The Hub client that downloads the weights, hf-xet (the transfer the Gemma repositories are stored for) and typer
# (the newest no longer brings the click that `hf` imports), at the versions the lock pins beside MaxText.
HUB_CLIENT = lock.pinned(("huggingface-hub", "hf-xet", "typer"))


def spec_for(
    config: PipelineConfig,
    *,
    venv: str = VENV,
    eval_venv: str = EVAL_VENV,
    work_dir: str = SCRATCH_DIR,
    state_dir: str = STATE_DIR,
) -> BootstrapSpec:
    """Seed step 3 (shared/seed/README.md) as a spec: apt packages, uv, Python 3.12, the venv, pinned MaxText with
    the Tunix the tests ran (`trainer_pins`, `maxtext_install`), and `install_tpu_post_train_extra_deps` when
    `install_post_train_extras` (slow: tunix, tpu-inference and vLLM from GitHub, over the pinned Tunix).
    `torch_backend` becomes UV_TORCH_BACKEND. On the full profile, also the model's weights into the HF cache under
    `work_dir`, which to_maxtext (seed step 4) then reads instead of downloading them.

    Independent work runs at once: apt; uv → Python → venv → MaxText (uv brings its own Python and MaxText's
    wheels need no compiler); and, once Python is there, the weights (network-bound: gigabytes). The post-train
    extras build from source with apt's compilers, so they need both apt and MaxText; bootstrap leaves them
    running (detached), and convert, which does not need them, runs beside them. The eval venv (`eval_install`) is
    installed once Python is there, beside MaxText: the eval phase runs after keep, so the run never waits for it."""
    apt = shlex.join(APT_GET)
    q_venv = shlex.quote(venv)
    steps = [
        Step(
            "apt",
            f"{apt_update(apt)} && {apt} upgrade -y --fix-missing && "
            f"{apt} install -y build-essential cmake ninja-build",
            1800 + APT_LOCK_WAIT_S,
            after=(),
        ),
        Step("uv", download_and_run(UV_INSTALLER), 600, after=()),
        Step("python", f"{UV} python install 3.12", 600, after=("uv",)),
        Step("venv", f"{UV} venv --python 3.12 --seed --allow-existing {q_venv}", 600, after=("python",)),
        Step("maxtext", maxtext_install(config, venv), 3600, after=("venv",)),
        Step("eval-venv", eval_install(eval_venv), 3600, after=("python",)),
    ]
    if config.install_post_train_extras:
        # Detached: convert does not need them, so it runs beside their build; train waits for them.
        steps.append(
            Step(
                "post-train-extras",
                f". {q_venv}/bin/activate && install_tpu_post_train_extra_deps",
                3600,
                after=("apt", "maxtext"),
                detached=True,
            )
        )
    if config.profile == "full":
        steps.append(
            Step(
                "weights",
                weights_download(
                    MODELS[config.model].hub_id, hf_home(work_dir), secret_file(state_dir, HF_TOKEN_SECRET)
                ),
                3600,
                after=("python",),
            )
        )
    return BootstrapSpec(tuple(steps))


def maxtext_install(config: PipelineConfig, venv: str) -> str:
    """`uv pip install` of MaxText with the trainer's pins, at the lowest versions MaxText allows; for the lock's
    MaxText, with the lock's overrides too, written to a file in the venv first (uv reads overrides from a file)."""
    packages = shlex.join((f"maxtext[tpu-post-train]=={config.maxtext_version}", *trainer_pins(config)))
    install = (
        f"UV_TORCH_BACKEND={shlex.quote(config.torch_backend)} {UV} pip install "
        f"--python {shlex.quote(venv)}/bin/python {packages} --resolution=lowest"
    )
    if not trainer_pins(config):
        return install
    overrides = shlex.quote(f"{venv}/{OVERRIDES_FILE}")
    return f"printf '%s\\n' {shlex.join(lock.pinned(lock.OVERRIDES))} > {overrides} && {install} --override {overrides}"


def eval_install(venv: str) -> str:
    """The eval venv: vLLM TPU and lm-eval with the lock's every version as constraints (written into the venv first),
    CPU torch (UV_TORCH_BACKEND=cpu: torch X+cpu satisfies the lock's ==X, and none of the CUDA wheels it lists is
    asked for), then NLTK's punkt_tab into the venv's share/nltk_data, on NLTK's own search path (sys.prefix), so
    that IFEval never downloads it at import (workload/eval/lm_eval_offline.py)."""
    q_venv = shlex.quote(venv)
    constraints = shlex.quote(f"{venv}/{EVAL_CONSTRAINTS}")
    return (
        f"{UV} venv --python 3.12 --allow-existing {q_venv} && "
        f"printf '%s\n' {shlex.join(lock.eval_pins())} > {constraints} && "
        f"UV_TORCH_BACKEND=cpu {UV} pip install --python {q_venv}/bin/python "
        f"{shlex.join(lock.pinned_eval(lock.EVAL_REQUIREMENTS))} --constraint {constraints} && "
        f"{q_venv}/bin/python -m nltk.downloader -d {q_venv}/share/nltk_data punkt_tab"
    )


def trainer_pins(config: PipelineConfig) -> tuple[str, ...]:
    """The trainer's libraries as the tests ran them (workload/core/lock.py), for the MaxText they ran with; another
    MaxText version resolves its own, and the preview says so (infra/config/cross_key_rules.py)."""
    if config.maxtext_version != lock.versions()["maxtext"]:
        return ()
    return lock.pinned(lock.TRAINER)


def weights_download(repo: str, home: str, token_path: str) -> str:
    """`hf download` of a whole model repository into the HF cache at `home`, the token read from the file
    `put-secret` wrote (never on a command line). Only a head start: /dev/shm is empty again after a reboot, and
    to_maxtext then downloads what is missing itself. `hf download` fails (non-zero, the Hub's reason) on a
    refused token, a gated repository not accepted yet, or a network error."""
    q_token = shlex.quote(token_path)
    missing = (
        f"no HF token at {token_path} on this host, but {repo} is gated: export HF_TOKEN before "
        f"`pulumi up`, or pipe it into `python -m remote put-secret {HF_TOKEN_SECRET}`"
    )
    return (
        f"{{ [ -s {q_token} ] || {{ echo {shlex.quote(missing)} >&2; exit 1; }}; }} && "
        f"HF_HOME={shlex.quote(home)} HF_TOKEN_PATH={q_token} HF_HUB_DISABLE_PROGRESS_BARS=1 "
        f"HF_HUB_DISABLE_TELEMETRY=1 HF_HUB_DISABLE_UPDATE_CHECK=1 {UV} tool run --python 3.12 "
        f"--from {HUB_CLIENT[0]} {' '.join(f'--with {pin}' for pin in HUB_CLIENT[1:])} "
        f"hf download {shlex.quote(repo)}"
    )


def apt_update(apt: str) -> str:
    """`apt update`, retried every 5 s while another apt holds the package lists' lock (apt-daily on a first
    boot): DPkg::Lock::Timeout covers dpkg's own lock only, and `update` fails at once on the lists' lock."""
    return (
        f"tries=0; until out=$({apt} update 2>&1); do "
        f'echo "$out" | grep -q "Could not get lock" && [ $tries -lt {APT_LOCK_WAIT_S // 5} ] '
        '|| { echo "$out" >&2; exit 1; }; tries=$((tries+1)); sleep 5; done; echo "$out"'
    )


def download_and_run(url: str) -> str:
    """A shell command that downloads an installer script into a file and runs it only if the download
    succeeded and is not empty: `curl … | sh` runs an empty script, succeeds, and marks the step done."""
    q_url = shlex.quote(url)
    return (
        f"script=$(mktemp) && trap 'rm -f \"$script\"' EXIT && "
        f'curl --fail --silent --show-error --location --retry 3 --output "$script" {q_url} && '
        f'{{ [ -s "$script" ] || {{ echo "downloaded an empty file from "{q_url} >&2; exit 1; }}; }} && '
        'sh "$script"'
    )
