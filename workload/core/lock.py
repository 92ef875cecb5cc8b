"""The versions the tests ran, as workload/maxtext-requirements.txt (the MaxText venv's lock) pins them: the one
place that names them. The VM's install pins the trainer's libraries from it (remote/pipeline/bootstrap/seed.py),
and the preview says when a stack's settings would train with others (infra/config/cross_key_rules.py)."""

from __future__ import annotations

import os
from functools import cache

LOCK = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "maxtext-requirements.txt")
# MaxText's SFT trainer is Tunix's; MaxText 0.2.3 accepts any google-tunix >= 0.1.3, and the VM's lowest resolution
# would take 0.1.3, whose checkpoints hold no optimizer state. 0.1.7 saves and restores it, and raises the floor of
# orbax-checkpoint and tensorstore; pylatexenc and importlib-resources it needs with no lower bound, where the
# lowest resolution would take versions years old.
TRAINER = ("google-tunix", "orbax-checkpoint", "tensorstore", "pylatexenc", "importlib-resources")
# MaxText 0.2.3 asks for safetensors >= 0.8.0 and Tunix 0.1.7 for < 0.8, so no resolution holds both: the lock was
# resolved, and the VM installs, with the lock's safetensors as an override (uv's --override) of both requirements.
OVERRIDES = ("safetensors",)


# The eval venv's lock (workload/eval/, remote/pipeline/bootstrap/seed.py `eval_install`), and what is asked of it.
EVAL_LOCK = os.path.join(os.path.dirname(LOCK), "eval-requirements.txt")
EVAL_REQUIREMENTS = ("vllm-tpu", "lm-eval")


@cache
def versions(path: str = LOCK) -> dict[str, str]:
    with open(path, encoding="utf-8") as f:
        pins = (line.split("==", 1) for line in f.read().splitlines() if "==" in line and not line.startswith("#"))
        return {name.strip(): version.strip() for name, version in pins}


def eval_pins() -> tuple[str, ...]:
    """Every `name==version` of the eval venv's lock."""
    return tuple(f"{name}=={version}" for name, version in versions(EVAL_LOCK).items())


def pinned_eval(names: tuple[str, ...]) -> tuple[str, ...]:
    """`name==version` for each name as the eval lock pins it; lm-eval with its IFEval extra."""
    locked = versions(EVAL_LOCK)
    extra = {"lm-eval": "[ifeval]"}
    return tuple(f"{name}{extra.get(name, '')}=={locked[name]}" for name in names)


def pinned(names: tuple[str, ...]) -> tuple[str, ...]:
    """`name==version` for each name, as the lock pins it."""
    locked = versions()
    return tuple(f"{name}=={locked[name]}" for name in names)
