"""Run by the MaxText venv's Python (orbax lives there): what a trainer does with its checkpoint directory on a
first attempt and on every later one. `save URL`: a CheckpointManager on a new directory saves step 1.
`resume URL`: a CheckpointManager opened on that existing directory, as MaxText's train_sft opens it on a new
VM or after a killed trainer, prints the latest step. A Cloud Storage error ends it with its message on stderr."""

import sys

import numpy as np
import orbax.checkpoint as ocp


def main(action: str, url: str) -> None:
    with ocp.CheckpointManager(url) as manager:
        if action == "save":
            manager.save(1, args=ocp.args.StandardSave({"weights": np.arange(8, dtype=np.float32)}))
            manager.wait_until_finished()
        print(manager.latest_step())


if __name__ == "__main__":
    main(*sys.argv[1:])
