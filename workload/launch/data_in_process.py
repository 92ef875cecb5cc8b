"""The tiny profile's data, read in the trainer's own process instead of grain's spawned workers.

MaxText's Hugging Face pipeline (0.2.2's and 0.2.3's) builds its grain DataLoader with `worker_count=1` (the default of
`hf_data_processing.preprocessing_pipeline`, which no config key reaches). On a TPU VM the worker overlaps the
tokenising of real data with the chips' steps, and the VM keeps it. On CPU, for the tiny profile's few rows, it is
only a cost: a spawned Python that imports TensorFlow, transformers and MaxText's pipeline again (~15 s of CPU), for
the training data and for every held-out pass, while the step waits for its batch.

grain's `worker_count=0` reads the same records through the same operations in the same order. One difference needs
care: Tunix re-iterates the held-out iterator at every pass, and it is a new worker that starts MaxText's
`HFDataSource`, a stream, from its first row again; in the trainer's process the source would go on, and the second
pass would read other examples than the first (seen: a learning rate of 0 gave 12.511, then 12.502). So each pass
here makes the held-out iterator anew. bench/data_in_process.py shows both ways give the same losses, training and
held-out.

The spawned worker's own path stays tested with MaxText by tests/workload/run/sft_batch.py (the first training batch,
built with the default worker), and what a spawned child imports under the launcher by
tests/workload/launch/test_trainer_launcher.py.
"""

from __future__ import annotations

import functools
from typing import Any, Callable

ENV = "TPU_SFT_DATA_IN_PROCESS"  # "1" in the tiny profile's environment (workload/launch/tpu_env.py cpu_env)


def read_data_in_the_trainers_process() -> None:
    from maxtext.input_pipeline import hf_data_processing, input_pipeline_interface

    def without_a_worker(make: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(make)
        def made(*args, **kwargs):
            # Each maker calls its module's global by name: swapped for the call, it reaches that call only.
            pipeline = hf_data_processing.preprocessing_pipeline
            hf_data_processing.preprocessing_pipeline = functools.partial(pipeline, grain_worker_count=0)
            try:
                return make(*args, **kwargs)
            finally:
                hf_data_processing.preprocessing_pipeline = pipeline

        return made

    make_held_out = without_a_worker(input_pipeline_interface.make_hf_eval_iterator)
    # create_data_iterator looks its iterator makers up among its module's globals on every call.
    input_pipeline_interface.make_hf_train_iterator = without_a_worker(input_pipeline_interface.make_hf_train_iterator)
    input_pipeline_interface.make_hf_eval_iterator = functools.wraps(make_held_out)(
        lambda *args, **kwargs: HeldOutFromTheStart(lambda: make_held_out(*args, **kwargs))
    )


class HeldOutFromTheStart:
    """The held-out iterator as a worker per pass gives it: `iter()` (Tunix, at each pass) starts from the first
    row; `next()` goes on (MaxText's hooks read one batch before training); `reset()` (MaxText 0.2.3's own loop,
    before each pass, then `iter()`) lets the next read start from the first row."""

    def __init__(self, make: Callable[[], Any]):
        self._make = make
        self._current: Any = None

    def __iter__(self) -> "HeldOutFromTheStart":
        self._current = self._make()
        return self

    def reset(self) -> None:
        self._current = None

    def __next__(self) -> Any:
        if self._current is None:
            self._current = self._make()
        return next(self._current)
