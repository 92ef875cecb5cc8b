"""Runs a real MaxText module with `gemma3-4b` pointed at the tiny model (tiny profile only).

MaxText's converters read the HF config and HF id of a model from module-level dicts (`HF_MODEL_CONFIGS`,
`HF_IDS`); there is no flag for a local config. This launcher swaps in the tiny config and local directory
for `gemma3-4b` in those dicts, then runs the named module as `__main__` with the remaining arguments, so
everything else is MaxText's own code path.

With `--eval-data-in-process` (train), MaxText's Hugging Face pipeline reads the held-out split in the trainer's
own process: it would otherwise start a data worker process on every held-out pass, which on this CPU costs ~17 s
and a peak of 2.2 GiB each time (imports), for a handful of tiny batches. The training data keep their worker, as
on a VM (its orphans are what the runner's reaping is tested on).

    python -m workload.tiny_launcher --model-dir DIR [--eval-data-in-process] MODULE ARGS...
"""

from __future__ import annotations

import argparse
import functools
import runpy
import sys

PATCHED_MODEL = "gemma3-4b"


def point_at_tiny(model_dir: str) -> None:
    from maxtext.checkpoint_conversion.utils.hf_model_configs import HF_MODEL_CONFIGS
    from maxtext.utils.globals import HF_IDS

    from workload.tiny import hf_config

    HF_MODEL_CONFIGS[PATCHED_MODEL] = hf_config()
    HF_IDS[PATCHED_MODEL] = model_dir


def eval_data_in_process() -> None:
    from maxtext.input_pipeline import hf_data_processing, input_pipeline_interface

    make_eval_iterator = hf_data_processing.make_hf_eval_iterator
    pipeline = hf_data_processing.preprocessing_pipeline

    def in_process(*args, **kwargs):
        hf_data_processing.preprocessing_pipeline = functools.partial(pipeline, grain_worker_count=0)
        try:
            return make_eval_iterator(*args, **kwargs)
        finally:
            hf_data_processing.preprocessing_pipeline = pipeline

    input_pipeline_interface.make_hf_eval_iterator = in_process


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m workload.tiny_launcher", description=__doc__.split("\n\n")[0])
    parser.add_argument("--model-dir", required=True, help="the tiny model's HF directory")
    parser.add_argument("--eval-data-in-process", action="store_true", help="the held-out split without a worker")
    parser.add_argument("module", help="the MaxText module to run, e.g. maxtext.checkpoint_conversion.to_maxtext")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="the module's own arguments, passed unchanged")
    args = parser.parse_args()
    point_at_tiny(args.model_dir)
    if args.eval_data_in_process:
        eval_data_in_process()
    sys.argv = [args.module, *args.args]
    runpy.run_module(args.module, run_name="__main__", alter_sys=True)


if __name__ == "__main__":
    main()
