"""Runs a real MaxText module with `gemma3-4b` pointed at the tiny model (tiny profile only).

MaxText's converters read the HF config and HF id of a model from module-level dicts (`HF_MODEL_CONFIGS`,
`HF_IDS`); there is no flag for a local config. This launcher swaps in the tiny config and local directory
for `gemma3-4b` in those dicts, then runs the named module as `__main__` with the remaining arguments, so
everything else is MaxText's own code path.

    python -m workload.tiny.launcher --model-dir DIR maxtext.checkpoint_conversion.to_maxtext ARGS...
"""

from __future__ import annotations

import argparse
import runpy
import sys

PATCHED_MODEL = "gemma3-4b"


def point_at_tiny(model_dir: str) -> None:
    from maxtext.checkpoint_conversion.utils.hf_model_configs import HF_MODEL_CONFIGS
    from maxtext.utils.globals import HF_IDS

    from workload.tiny.assets import hf_config

    HF_MODEL_CONFIGS[PATCHED_MODEL] = hf_config()
    HF_IDS[PATCHED_MODEL] = model_dir


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m workload.tiny.launcher", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", required=True, help="the tiny model's HF directory")
    parser.add_argument("module", help="the MaxText module to run, e.g. maxtext.checkpoint_conversion.to_maxtext")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the module's own arguments, passed unchanged")
    args = parser.parse_args()
    point_at_tiny(args.model_dir)
    sys.argv = [args.module, *args.args]
    runpy.run_module(args.module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
