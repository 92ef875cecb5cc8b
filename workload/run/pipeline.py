"""Runs the steps in order up to `until`, each once per set of inputs.

A step's fingerprint covers its own inputs and the fingerprint of the step before it, so a changed input
re-runs that step and the ones after it, and a finished pipeline re-run with the same inputs starts no
subprocess at all. A failed step ends the run: earlier outputs stay, no marker is written for it.

The last stdout line is always the summary:

    {"event": "summary", "ok": bool, "until": STEP, "run_name": …, "checkpoint": converted checkpoint,
     "trained_checkpoint": …, "final_step": N, "final_loss": L, "eval_loss_first": E0, "eval_loss_final": E1,
     "eval_curve": [[step, loss], ...], "learned": bool or null (workload/measure/learning.py), "export_dir": …,
     "config_fixes": [...], "verify": {..., "logits_kl_max": K, "kl_bound": B, "samples": {...}, ...},
     "kept_dir": …, "manifest": …,
     "train_wall_s": S, "chips": C, "chip_hours": H, "tflops_per_device": F, "mfu": M or null,
     "mfu_reason": WHY (when mfu is null), "tokens_per_s": T, "goodput": G, "time_split_s": {...},
     "hbm_peak_bytes_per_chip": P or null, "hbm_bytes_limit_per_chip": L, "hbm_reason": WHY (when P is null),
     "failed_step": STEP or null, "error": ONE_LINE or null, "logs": [raw logs of this invocation],
     "worker": W (on a multi-host slice: which worker; workers other than 0 end after train),
     "bill": {"vm_up_s", "chips", "chip_hours", "usd_per_chip_hour", "cost_usd"}
       (workload/spend/bill.py; when measured)}

With `summaries_at` (the run on the VM: the last step of each phase before `until`, workload/core/contract.py
PHASE_UNTIL), a summary is also printed as each of those steps ends, with `until` that step and what the steps up
to it found, `logs` the logs since the summary before: what that phase's task prints, as when it ran alone. A failed
step's summary is the last; the phases after it have none.

Facts of steps not reached are absent; `chips` is 0 for the tiny profile (CPU); the throughput facts are
workload/measure/throughput.py's, the HBM ones workload/measure/hbm_peak.py's, the logit figures
workload/measure/logit_parity.py's.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import time

from workload.core import export_fix
from workload.core.contract import RUN_STEPS
from workload.launch.proc import StepFailed
from workload.measure import logit_parity, samples, verify_hf
from workload.run import eval_step, kept, log_mirror, markers, mount, slice_rejoin, storage
from workload.run import steps as step_functions
from workload.run.fingerprint import fingerprint
from workload.run.resume_budget import BootResume
from workload.run.run_state import REFUSED_STEP
from workload.run.steps import Context
from workload.tiny import assets as tiny

ORDER = RUN_STEPS
STEPS = {**step_functions.STEPS, "eval": eval_step.evaluate}  # each step's function, by name
# The steps after keep: not part of what a kept model records it was made from (its manifest), so changing their
# settings never re-keeps, and a kept model found for the steps up to keep still runs them.
AFTER_KEEP = ORDER[ORDER.index("keep") + 1 :]


LEADER_ONLY = ("export", "verify", "keep", "eval")  # once per slice, on worker 0 (workload/launch/jax_process.py)


def plan(profile: str, until: str, leader: bool = True) -> list[str]:
    steps = [s for s in ORDER[: ORDER.index(until) + 1] if leader or s not in LEADER_ONLY]
    return ["assets", *steps] if profile == "tiny" else steps


def step_inputs(ctx: Context, step: str) -> dict:
    """Each step's own inputs (paths excluded where the layout derives them from these same inputs). convert and
    train depend on exactly the settings their phase does (PipelineConfig.phase_settings), so a change re-runs a
    step on the VM exactly when the Pulumi program re-runs its phase."""
    config = ctx.config
    return {
        "assets": lambda: {"spec": tiny.SPEC, "chat_template": tiny.CHAT_TEMPLATE, "maxtext": config.maxtext_version},
        "convert": lambda: config.phase_settings("convert"),
        "train": lambda: {**config.phase_settings("train"), "run_name": ctx.layout.run_name},
        "export": lambda: {"fix": {export_fix.KEY: export_fix.RIGHT}},
        "verify": lambda: {
            "prompt": verify_hf.PROMPT,
            "new_tokens": verify_hf.NEW_TOKENS,
            "logit_prompts": logit_parity.PROMPTS,
            "kl_bound": logit_parity.KL_BOUND[config.profile],
            "samples": {
                "prompts": samples.VERIFY_PROMPTS,
                "held_out": samples.HELD_OUT_QUESTIONS if config.eval_interval else 0,
                "new_tokens": samples.NEW_TOKENS,
            },
        },
        "keep": lambda: {"kept_dir": ctx.layout.kept_dir},
        "eval": lambda: eval_step.eval_inputs(ctx),
    }[step]()


def _handed_on(fingerprint_: str, marker: dict) -> str:
    """What the next step depends on: this step's inputs and what it actually produced, so a step re-run
    with different results (a tampered or regenerated output) re-runs the steps after it too."""
    return fingerprint({"inputs": fingerprint_, "outputs": marker["manifest"]})


@contextlib.contextmanager
def _exclusive(work_dir: str):
    """One runner per work dir: two would train into the same run and overwrite each other's outputs.
    flock is released by the kernel when its holder dies, so a killed runner never leaves a stale lock."""
    os.makedirs(work_dir, exist_ok=True)
    with open(os.path.join(work_dir, ".lock"), "w", encoding="utf-8") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StepFailed(f"another runner is using {work_dir}; wait for it or stop it") from None
        yield


def run(
    ctx: Context, until: str = "keep", summaries_at: tuple[str, ...] = (), boot_resume: BootResume | None = None
) -> int:
    """Runs the plan under the work dir's lock; emits phase events, a summary after each step of `summaries_at`
    and the summary; returns the exit status (0 done, 1 a step failed or the boot-resume budget refused this
    attempt, 2 the work dir is busy). `boot_resume`: the VM's start-up began this attempt (resume_budget.py; on a
    slice, every host's together or none: slice_rejoin.py)."""
    layout = ctx.layout
    try:
        with (
            _exclusive(layout.work_dir),
            log_mirror.mirrored(ctx.events, layout.runs_dir and layout.run_dir, ctx.scrub, ctx.worker.leader),
        ):
            refused = boot_resume and slice_rejoin.refusal(ctx, boot_resume)
            if refused:
                ctx.events.emit(
                    "summary",
                    ok=False,
                    until=until,
                    run_name=layout.run_name,
                    failed_step=REFUSED_STEP,
                    error=refused,
                    logs=[],
                )
                return 1
            return _run(ctx, until, [s for s in summaries_at if ORDER.index(s) < ORDER.index(until)])
    except StepFailed as busy:
        ctx.events.emit("error", phase="setup", cause=busy.cause, log=None, tail=[])
        ctx.events.emit(
            "summary",
            ok=False,
            until=until,
            run_name=ctx.layout.run_name,
            failed_step="setup",
            error=busy.cause,
            logs=[],
        )
        return 2


def step_fingerprints(ctx: Context, until: str = "keep") -> dict[str, str]:
    """Each step's inputs up to `until`, one fingerprint per step: what a kept model records it was made from."""
    return {step: fingerprint(step_inputs(ctx, step)) for step in plan(ctx.config.profile, until, ctx.worker.leader)}


def _reuse_kept(ctx: Context, until: str, summaries_at: list[str]) -> dict | None:
    """A model kept from these inputs (by another VM, before this one): verify it and report it; the summary of the
    steps it stands for, None where there is none. A job that ends before train does not know train's inputs: it
    converts nothing for a kept model, and train converts first if its own inputs turn out to differ. The steps
    after keep are not the kept model's (AFTER_KEEP): the caller runs them, and its summary is the last."""
    kept_until = "keep" if until in AFTER_KEEP else until
    steps = plan(ctx.config.profile, kept_until, ctx.worker.leader)
    found = kept.find(ctx.layout.kept_dir, step_fingerprints(ctx, kept_until))
    if found is None:
        return None
    kept_dir, manifest = found
    reason = f"the model kept in {kept_dir} has these inputs and matches its manifest"
    for step in steps:
        ctx.events.emit("phase", phase=step, status="skipped", reason=reason)
        if step in summaries_at:
            _emit_kept(ctx, kept_dir, manifest, steps[: steps.index(step) + 1], step)
    if kept_until == until:
        _emit_kept(ctx, kept_dir, manifest, steps, until)
    return _kept_summary(kept_dir, manifest, steps, until)


def _emit_kept(ctx: Context, kept_dir: str, manifest: dict, steps: list[str], until: str) -> None:
    """The summary of a kept model's steps up to `until`, as the run that made it reported them."""
    ctx.events.emit("summary", **_kept_summary(kept_dir, manifest, steps, until))


def _kept_summary(kept_dir: str, manifest: dict, steps: list[str], until: str) -> dict:
    # The kept run's name: a run that ends before train makes its own from defaults for the settings it is not given.
    return {
        **kept.facts(manifest, steps),
        "ok": True,
        "until": until,
        "run_name": manifest.get("run_name"),
        "failed_step": None,
        "error": None,
        "kept_dir": kept_dir,
        "manifest": storage.join(kept_dir, kept.MANIFEST),
        "kept_files": len(manifest["files"]),
        "kept_bytes": sum(e["size"] for e in manifest["files"]),
        "kept_at": manifest.get("kept_at"),
        "reused_kept_model": True,
        "logs": [],
    }


def _run(ctx: Context, until: str, summaries_at: list[str]) -> int:
    ctx.step_fingerprints = step_fingerprints(ctx)  # the steps up to keep: what a kept model records
    reused = _reuse_kept(ctx, until, summaries_at)
    steps = plan(ctx.config.profile, until, ctx.worker.leader)
    if reused is not None:
        steps = [s for s in steps if s in AFTER_KEEP]
        if not steps:
            return 0
    os.makedirs(ctx.layout.results_dir, exist_ok=True)
    summary: dict = {"ok": True, "until": until, "run_name": ctx.layout.run_name, "failed_step": None, "error": None}
    if reused is not None:  # the steps after keep follow the kept model's, with its facts
        summary = {**reused, **summary, "run_name": reused["run_name"]}
        del summary["reused_kept_model"]
    if ctx.worker.multi_host:  # which worker's summary this is: only worker 0's runs up to `until`
        summary["worker"] = ctx.worker.id
    previous = ""
    logged = 0  # how many of ctx.log_paths an earlier summary listed
    for step in steps:
        current = fingerprint({"step": step, "inputs": step_inputs(ctx, step), "after": previous})
        marker_path = ctx.layout.marker(step)
        marker = markers.read(marker_path)
        reason = markers.why_not_done(marker, current, ctx.layout.work_dir)
        if reason is None and marker is not None:
            previous = _handed_on(current, marker)
            ctx.events.emit(
                "phase", phase=step, status="skipped", reason="done with the same inputs", **marker["facts"]
            )
            summary.update(marker["facts"])
            if step in summaries_at:
                logged = _emit_summary(ctx, {**summary, "until": step}, logged)
            continue
        ctx.events.emit("phase", phase=step, status="start", reason=reason)
        markers.clear(marker_path)
        started = time.monotonic()
        try:
            if ctx.finish_install is not None and step not in ("assets", "convert"):
                script, ctx.finish_install = ctx.finish_install, None
                ctx.run("finish-install", ["sh", script])
            if step == "keep" and ctx.required_mount is not None:
                mount.require_mounted(ctx.required_mount)
            outcome = STEPS[step](ctx)
            marker = markers.write(
                marker_path,
                step=step,
                fingerprint=current,
                outputs=outcome.outputs,
                base=ctx.layout.work_dir,
                facts=outcome.facts,
                hashes=outcome.hashes,
            )
            previous = _handed_on(current, marker)
        except Exception as error:  # noqa: BLE001  one line for any failure, the runner's own included
            failure = error if isinstance(error, StepFailed) else StepFailed(f"{type(error).__name__}: {error}")
            cause = ctx.scrub(failure.cause.splitlines()[0] if failure.cause else type(error).__name__)
            seconds = round(time.monotonic() - started, 1)
            ctx.events.emit("phase", phase=step, status="failed", seconds=seconds, cause=cause)
            ctx.events.emit("error", phase=step, cause=cause, log=failure.log, tail=failure.tail)
            summary.update(ok=False, failed_step=step, error=cause)
            break
        seconds = round(time.monotonic() - started, 1)
        ctx.events.emit("phase", phase=step, status="done", seconds=seconds, **outcome.facts)
        summary.update(outcome.facts)
        if step in summaries_at:
            logged = _emit_summary(ctx, {**summary, "until": step}, logged)
    _emit_summary(ctx, summary, logged)
    return 0 if summary["ok"] else 1


def _emit_summary(ctx: Context, summary: dict, logged: int) -> int:
    """Emit `summary` with the logs not listed before and the bill so far; returns how many logs are listed now."""
    summary = {**summary, "logs": ctx.log_paths[logged:]}
    if ctx.meter is not None:
        summary["bill"] = ctx.meter.reading()
    ctx.events.emit("summary", **summary)
    return len(ctx.log_paths)
