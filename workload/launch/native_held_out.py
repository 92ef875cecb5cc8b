"""MaxText's own SFT loop's held-out loss, measured as Tunix's loop measures it: before the first update too.

MaxText 0.2.3's `train_sft_native.train_loop` evaluates after an update when `step > start_step and (step + 1) %
eval_interval == 0`: never before the first one, so a run has no held-out loss of the model it started from, which
"did it learn" compares against (workload/measure/learning.py, `requireLearning`); Tunix's loop evaluates before its
first step. So, for that loop only, once its train and eval steps are jitted (`train_utils.jit_train_and_eval_step`,
which it is handed the state and the held-out iterator for), one pass runs on the state it starts from, the base
model's or a resumed checkpoint's, with the same eval step, batches (`eval_steps`) and formula as its own passes
(MetricLogger `_finalize_eval_metrics`: total loss over total weights), and is logged in MetricLogger's words
(`_log_eval_metrics`), numbered as that loop numbers steps: "after train step -1" before the first update
(workload/core/trainer_loop.py).

MaxText 0.2.2 also added every pass into the same `cumulative_eval_metrics`, so its second pass reported the mean
over both; this module reset them per pass. 0.2.3's loop resets them itself before each pass
(`metric_logger.reset_eval_metrics()` in `train_loop`), so that half of the patch is gone.

Runs in the MaxText venv: the trainer's launcher applies it to MaxText's own loop (workload/launch/trainer_launcher.py).
"""

from __future__ import annotations

from typing import Any, Callable

from workload.launch import pinned_code

PATCH = "workload/launch/native_held_out.py"
# sha256 of maxtext 0.2.3's train_sft_native.train_loop (when it evaluates, that it resets each pass, what it hands
# the jit) and train_utils.jit_train_and_eval_step (its arguments; the same source as 0.2.2's)
# (workload/launch/pinned_code.py).
MAXTEXT_TRAIN_LOOP_SHA256 = "38b7bb4ddb50398cf0e904fd7729ae1b61b85b319ed771a1881bacaeac1b0b87"
MAXTEXT_JIT_STEPS_SHA256 = "5b617dea89a150332c4348adf9cc73aad86e7f2804f837bfce6915e54c53287a"


def patch() -> None:
    from maxtext.trainers.post_train.sft import train_sft_native
    from maxtext.utils import train_utils

    pinned_code.check(train_sft_native, "train_loop", "maxtext", MAXTEXT_TRAIN_LOOP_SHA256, PATCH)
    pinned_code.check(train_utils, "jit_train_and_eval_step", "maxtext", MAXTEXT_JIT_STEPS_SHA256, PATCH)
    train_utils.jit_train_and_eval_step = _evaluating_first(train_utils.jit_train_and_eval_step)


def _evaluating_first(jit_train_and_eval_step: Callable) -> Callable:
    def jit_and_evaluate(
        config: Any,
        model: Any,
        mesh: Any,
        state: Any,
        state_mesh_shardings: Any,
        train_step: Any,
        eval_step: Any = None,
        eval_data_iterator: Any = None,
        params_shardings: Any = None,
    ) -> tuple[Any, Any]:
        p_train_step, p_eval_step = jit_train_and_eval_step(
            config,
            model,
            mesh,
            state,
            state_mesh_shardings,
            train_step,
            eval_step,
            eval_data_iterator,
            params_shardings,
        )
        if p_eval_step is not None and config.eval_interval > 0:
            held_out_pass(config, mesh, state, p_eval_step, eval_data_iterator)
        return p_train_step, p_eval_step

    return jit_and_evaluate


def held_out_pass(config: Any, mesh: Any, state: Any, p_eval_step: Any, eval_data_iterator: Any) -> None:
    """One pass as train_loop makes it (iterating the held-out iterator restarts it), logged as MetricLogger logs one
    (metric_logger.py `_log_eval_metrics`)."""
    import jax
    import numpy as np
    from flax.linen import partitioning as nn_partitioning
    from maxtext.utils import max_logging
    from maxtext.utils.globals import EPS

    rng = jax.random.PRNGKey(config.init_weights_seed)  # the eval step runs without dropout: any key will do
    total_loss = total_weights = 0.0
    batches = 0
    for batch in eval_data_iterator:
        if config.eval_steps > 0 and batches >= config.eval_steps:
            break
        with jax.set_mesh(mesh), nn_partitioning.axis_rules(config.logical_axis_rules):
            scalars = p_eval_step(state, batch, rng)["scalar"]
        total_loss += float(scalars["evaluation/total_loss"])
        total_weights += float(scalars["evaluation/total_weights"])
        batches += 1
    if batches:
        loss = total_loss / (total_weights + EPS)
        max_logging.log(
            f"Completed eval after train step {int(state.step) - 1}, loss={loss:.3f}, perplexity={np.exp(loss):.3f}, "
            f"total_weights={total_weights}"
        )
