"""What the three rehearsals' command lines share (`python -m rehearsal`, `rehearsal.slice`, `rehearsal.fresh_vm`):
help from the module's docstring, `--dir`, `--steps` and `--lora`, and the checks of their input, each a line on
stderr."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from rehearsal.local_host import MAXTEXT_VENV


def parser(prog: str, doc: str, default_dir: str) -> argparse.ArgumentParser:
    """`doc`'s first paragraph as the description, the rest as the epilog, as written; and `--dir`."""
    intro, epilog = doc.split("\n\n", 1)
    parser = argparse.ArgumentParser(
        prog=prog, description=intro, epilog=epilog, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--dir", type=Path, default=Path(default_dir), help=f"where the run lives (default {default_dir})"
    )
    return parser


# `--lora`: a LoRA run's settings over the rehearsal stack's: the loop that applies LoRA, and a learning rate at which
# the tiny model's adapter (rank 16 on every projection) visibly learns in 20 steps.
LORA = {"tpu-sft:tuning": "lora", "tpu-sft:trainer": "tunix", "tpu-sft:learningRate": "0.005"}
QLORA = {**LORA, "tpu-sft:tuning": "qlora"}  # nf4, its default


def add_tuning(parser: argparse.ArgumentParser) -> None:
    tuning = parser.add_mutually_exclusive_group()
    tuning.add_argument("--lora", action="store_true", help="train a LoRA adapter (tpu-sft:tuning lora, trainer tunix)")
    tuning.add_argument("--qlora", action="store_true", help="the same on frozen weights quantised to nf4")


def tuning_settings(args: argparse.Namespace) -> dict[str, str]:
    """The stack settings `--lora` or `--qlora` put over the rehearsal stack's; none without either."""
    return QLORA if args.qlora else LORA if args.lora else {}


def add_steps(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--steps", type=int, help="training steps (default: the rehearsal stack's)")


def bad_steps(steps: int | None) -> bool:
    """Says what is wrong with `--steps`, if anything."""
    if steps is None or steps >= 1:
        return False
    print("error: --steps must be at least 1. Fix: pass e.g. --steps 20", file=sys.stderr)
    return True


def no_maxtext_venv() -> bool:
    """Says so when the MaxText venv the rehearsal runs is missing."""
    if (MAXTEXT_VENV / "bin" / "python").exists():
        return False
    print(f"error: {MAXTEXT_VENV} is missing. Fix: run scripts/maxtext-venv (scripts/rehearse does)", file=sys.stderr)
    return True
