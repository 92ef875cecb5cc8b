"""Where every step reads and writes. The scratch (work) directory mirrors the seed's /dev/shm layout:

    <work>/<model>/mt-format/0/items                        converted checkpoint (seed step 4)
    <runs>/<model>/post-train/<run>/checkpoints/<step>/     SFT checkpoints (seed step 5; each loop numbers and
                                                            lays them out its own way: core/trainer_loop.py)
    <runs>/<model>/post-train/<run>/{tensorboard,metrics}/  (MaxText's own; the runner's metrics are copied
                                                            to .../train-metrics/)
    <work>/<model>/hf-trained/                              the export (seed step 6); a LoRA run's merged model
    <work>/<model>/hf-adapter/, hf-base/                    a LoRA run's PEFT adapter, and the base it was merged into
    <work>/hf-home/          HF_HOME (the seed puts the HF cache on /dev/shm too)
    <work>/train-metrics/<run>/  every training step the runner parsed, and each attempt's start and end
    <work>/logs/             the full raw log of every MaxText subprocess
    <work>/markers/          one done-marker per step
    <work>/results/          verify.json, export-fixes.json, loss.png
    <work>/tiny/             the tiny profile's model and dataset
    <runs>/jax-cache/        JAX's persistent compilation cache, when <runs> is set

and what is kept lands in `<output>/<run>/`, copied to `<kept copy>/<run>/` where one is given (the bucket). `<runs>`
is where training outlives the VM (workload/run/storage.py): a gs:// prefix in a bucket or a directory on the data
disk; without one, the work dir (the seed's layout).
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from workload.core.trainer_loop import TrainerLoop
from workload.run import storage


def hf_home(work_dir: str) -> str:
    """HF_HOME under a work dir: also where bootstrap downloads the weights to (remote/pipeline/bootstrap/seed.py)."""
    return os.path.join(work_dir, "hf-home")


@dataclass(frozen=True)
class Layout:
    work_dir: str
    output_dir: str
    model: str
    run_name: str
    runs_dir: str | None = None  # a local path or gs:// URL; None: the work dir
    kept_copy_root: str | None = None  # where keep copies what it keeps too (gs://…: fetched with no VM); None: nowhere

    def _model(self, *parts: str) -> str:
        return os.path.join(self.work_dir, self.model, *parts)

    @property
    def hf_home(self) -> str:
        return hf_home(self.work_dir)

    @property
    def logs_dir(self) -> str:
        return os.path.join(self.work_dir, "logs")

    @property
    def markers_dir(self) -> str:
        return os.path.join(self.work_dir, "markers")

    @property
    def results_dir(self) -> str:
        return os.path.join(self.work_dir, "results")

    @property
    def tiny_dir(self) -> str:
        return os.path.join(self.work_dir, "tiny")

    @property
    def converted_base(self) -> str:
        """to_maxtext's base_output_directory."""
        return self._model("mt-format")

    @property
    def converted_checkpoint(self) -> str:
        """What train_sft loads (the seed's MAXTEXT_CKPT_PATH)."""
        return os.path.join(self.converted_base, "0", "items")

    @property
    def post_train_base(self) -> str:
        """train_sft's base_output_directory: a local path or a gs:// URL."""
        if self.runs_dir is None:
            return self._model("post-train")
        return storage.join(self.runs_dir, self.model, "post-train")

    @property
    def run_dir(self) -> str:
        return storage.join(self.post_train_base, self.run_name)

    @property
    def compile_cache_dir(self) -> str | None:
        """MaxText's `jax_cache_dir` beside the runs, so a resumed or new VM loads its training step instead of
        compiling it, and every worker of a slice reads it: JAX writes the cache from process 0 only, so with
        MaxText's default (~/jax_cache on each host) a retry finds worker 0 ready long before the others. JAX keys
        each entry by the program, its compile options, devices and versions, so one cache serves every
        configuration; the CPU stand-in of a slice, whose processes' keys differ, trains with none
        (workload/run/commands.py). None (no runs dir): MaxText's default."""
        return None if self.runs_dir is None else storage.join(self.runs_dir, "jax-cache")

    @property
    def checkpoints_dir(self) -> str:
        return storage.join(self.run_dir, "checkpoints")

    def checkpoint(self, step: int) -> str:
        return storage.join(self.checkpoints_dir, str(step))

    def trained_params(self, loop: TrainerLoop, updates: int) -> str:
        """What to_huggingface loads (the seed's POST_TRAIN_PATH): the parameters after `updates` updates, in the
        checkpoint that `loop` numbers and lays out its own way (workload/core/trainer_loop.py)."""
        return storage.join(self.checkpoint(loop.checkpoint_step(updates)), loop.weights_item)

    @property
    def tensorboard_dir(self) -> str:
        return storage.join(self.run_dir, "tensorboard")

    @property
    def train_metrics_dir(self) -> str:
        """The runner's own training records, on local disk: appended one line per step."""
        return os.path.join(self.work_dir, "train-metrics", self.run_name)

    @property
    def metrics_file(self) -> str:
        """Every training step the runner parsed from the log (the event stream is rate-limited)."""
        return os.path.join(self.train_metrics_dir, "train_steps.jsonl")

    @property
    def attempts_file(self) -> str:
        return os.path.join(self.train_metrics_dir, "attempts.jsonl")

    @property
    def persisted_metrics_dir(self) -> str:
        """Where the runner's records are copied beside the checkpoints, so a new VM continues the loss curve."""
        return storage.join(self.run_dir, "train-metrics")

    @property
    def export_dir(self) -> str:
        return self._model("hf-trained")

    @property
    def adapter_dir(self) -> str:
        return self._model("hf-adapter")

    @property
    def base_export_dir(self) -> str:
        return self._model("hf-base")

    @property
    def kept_dir(self) -> str:
        return storage.join(self.output_dir, self.run_name)

    @property
    def kept_copy_dir(self) -> str | None:
        return None if self.kept_copy_root is None else storage.join(self.kept_copy_root, self.run_name)

    def result(self, name: str) -> str:
        return os.path.join(self.results_dir, name)

    def marker(self, step: str) -> str:
        return os.path.join(self.markers_dir, f"{step}.json")
