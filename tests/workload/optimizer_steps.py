"""Run by the MaxText venv's Python (orbax lives there): the step counters in a checkpoint's optimizer state, as
JSON `{path: value}`, every integer scalar of the tree (the optimizer's own step, Adam's count, the schedule's
count, optax.MultiSteps' gradient and mini steps). `python optimizer_steps.py DIR`, a checkpoint item's directory."""

import json
import sys

import jax
import numpy as np
import orbax.checkpoint as ocp


def main(directory: str) -> None:
    tree = ocp.PyTreeCheckpointer().restore(directory)
    flat, _ = jax.tree_util.tree_flatten_with_path(tree)
    counters = {
        jax.tree_util.keystr(path): int(value)
        for path, value in flat
        if np.ndim(value) == 0 and np.issubdtype(np.asarray(value).dtype, np.integer)
    }
    print(json.dumps(counters))


if __name__ == "__main__":
    main(*sys.argv[1:])
