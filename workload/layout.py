"""Where every step reads and writes. The scratch (work) directory mirrors the seed's /dev/shm layout:

    <work>/<model>/mt-format/0/items                        converted checkpoint (seed step 4)
    <work>/<model>/post-train/<run>/checkpoints/<step>/     SFT checkpoints (seed step 5)
    <work>/<model>/post-train/<run>/{tensorboard,metrics}/
    <work>/<model>/hf-trained/                              the export (seed step 6)
    <work>/hf-home/          HF_HOME (the seed puts the HF cache on /dev/shm too)
    <work>/logs/             the full raw log of every MaxText subprocess
    <work>/markers/          one done-marker per step
    <work>/results/          verify.json, export-fixes.json, loss.png
    <work>/tiny/             the tiny profile's model and dataset

and what is kept lands in `<output>/<run>/`.
"""

from __future__ import annotations

import os
from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    work_dir: str
    output_dir: str
    model: str
    run_name: str

    def _model(self, *parts: str) -> str:
        return os.path.join(self.work_dir, self.model, *parts)

    @property
    def hf_home(self) -> str:
        return os.path.join(self.work_dir, "hf-home")

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
        return self._model("post-train")

    @property
    def run_dir(self) -> str:
        return os.path.join(self.post_train_base, self.run_name)

    @property
    def checkpoints_dir(self) -> str:
        return os.path.join(self.run_dir, "checkpoints")

    def checkpoint(self, step: int) -> str:
        return os.path.join(self.checkpoints_dir, str(step))

    def trained_params(self, step: int) -> str:
        """What to_huggingface loads (the seed's POST_TRAIN_PATH)."""
        return os.path.join(self.checkpoint(step), "model_params")

    @property
    def tensorboard_dir(self) -> str:
        return os.path.join(self.run_dir, "tensorboard")

    @property
    def metrics_file(self) -> str:
        """Every training step the runner parsed from the log (the event stream is rate-limited)."""
        return os.path.join(self.run_dir, "metrics", "train_steps.jsonl")

    @property
    def export_dir(self) -> str:
        return self._model("hf-trained")

    @property
    def kept_dir(self) -> str:
        return os.path.join(self.output_dir, self.run_name)

    def result(self, name: str) -> str:
        return os.path.join(self.results_dir, name)

    def marker(self, step: str) -> str:
        return os.path.join(self.markers_dir, f"{step}.json")
