"""python -m rehearsal: the whole `pulumi up` path on this machine, with a tiny model and no cloud.

  1. evaluates the real Pulumi program with rehearsal/Pulumi.rehearsal.yaml under the Pulumi SDK's mock
     engine, and takes the post-deploy commands it declares (what `pulumi up` would run);
  2. starts a throwaway sshd on 127.0.0.1 as the VM, with its own host and user keys;
  3. runs those commands in order as pulumi-command would: bootstrap → convert → train → export (export
     includes verify and keep), each shown as pulumi-command shows it (its last status line; its whole log in
     DIR/task-logs), then what `pulumi up` would leave on screen: each phase's outcome, or the failed one's error;
  4. prints where the model, the loss curve and the manifest are, whether the held-out loss fell, and the
     before/after answers (samples.md); stops the sshd and deletes its keys.

`--lora` rehearses a LoRA run (tpu-sft:tuning lora, on Tunix's loop, which applies it): the export is then the
adapter as a PEFT repository and peft's merge of it into the base, each checked against MaxText's logits with the
adapter applied, and both are kept (docs/tuning.md). `--qlora` rehearses the same on frozen weights quantised while
training (tpu-sft:tuning qlora, nf4): the checks are LoRA's, on the bf16 base the export is merged into, and the merged
model's distance to the quantised base it trained on is printed beside them, not bounded.

Needs: .venv (scripts/venv) and .maxtext-venv (scripts/maxtext-venv); scripts/rehearse makes both.
Leaves: DIR/disk (what the data disk would keep), DIR/scratch (the VM's /dev/shm), DIR/vm/host (its jobs
and logs); the sshd and its keys are gone.
Running it again with the same DIR redoes nothing; a run interrupted with Ctrl-C resumes where it stopped. Killed
outright once convert has started (a laptop closed), it leaves the run going on alone on the local "VM" (a job in
its own session) to the kept model; running it again re-attaches to the run, or prints a finished run's summaries,
and starts nothing.
Only one rehearsal at a time may use a DIR (a lock file in it says which process holds it).
Exit status: 0 done, 1 a phase failed (its error, as `pulumi up` would show it, says which and why), 2 bad
input (as every CLI here), 3 DIR is in use by another rehearsal or cannot be created.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from rehearsal import cli
from rehearsal.dir_lock import DirectoryUnusable, exclusive
from rehearsal.local_host import LocalHost
from rehearsal.run import record, up_as_pulumi_shows
from workload.core.contract import EXIT_BAD_INPUT
from workload.measure.learning import describe as describe_learning
from workload.run import kept
from workload.run.phase_outcome import outcome_line

CONFIG = Path(__file__).resolve().parent / "Pulumi.rehearsal.yaml"


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser("python -m rehearsal", __doc__, "runs/rehearsal")
    cli.add_steps(parser)
    cli.add_tuning(parser)
    args = parser.parse_args(argv)
    if cli.no_maxtext_venv() or cli.bad_steps(args.steps):
        return EXIT_BAD_INPUT
    directory = args.dir.resolve()
    try:
        with exclusive(directory):
            return _rehearse(directory, args.steps, cli.tuning_settings(args))
    except DirectoryUnusable as unusable:
        print(f"error: {unusable}", file=sys.stderr)
        return 3


def _rehearse(directory: Path, steps: int | None, tuning: dict[str, str]) -> int:
    started = time.monotonic()
    host = LocalHost.start(directory / "vm")
    try:
        overrides = host.config_overrides()
        if steps is not None:
            overrides["tpu-sft:steps"] = str(steps)
        overrides.update(tuning)
        _, commands = record(CONFIG, overrides)
        summary = up_as_pulumi_shows(
            commands,
            lambda command: host.environment(command.environment, directory, task_logs=directory / "task-logs"),
        )
        if summary is None:
            return 1
    finally:
        host.stop()
    print(f"\nrehearsal done in {time.monotonic() - started:.0f} s")
    print(f"  model:      {summary.get('kept_dir')}")
    print(f"  loss curve: {Path(summary.get('kept_dir', '')) / 'loss.png'}")
    print(f"  manifest:   {summary.get('manifest')}")
    verify = summary.get("verify") or {}
    print(
        f"  final step {summary.get('final_step')}, loss {summary.get('final_loss')}; "
        f"verify {'passed' if verify.get('ok') else 'FAILED'}: {verify.get('model_class')} generated "
        f"{json.dumps(verify.get('generated_text'))}"
    )
    print(
        f"  logits: max KL {verify.get('logits_kl_max', float('nan')):.2g} per position "
        f"(bound {verify.get('kl_bound')}), top-1 agreement {verify.get('logits_top1_agreement')}"
    )
    if "adapter_logits_kl_max" in verify:
        adapter = Path(summary.get("kept_dir", "")) / kept.ADAPTER
        print(
            f"  adapter on the base (peft): max KL {verify['adapter_logits_kl_max']:.2g} per position, top-1 "
            f"agreement {verify.get('adapter_logits_top1_agreement')}; kept in {adapter}"
        )
    if "quantised_base_logits_kl_max" in verify:
        print(
            f"  merged model vs the quantised base it trained on (not bounded): max KL "
            f"{verify['quantised_base_logits_kl_max']:.2g} per position, mean "
            f"{verify['quantised_base_logits_kl_mean']:.2g}, top-1 agreement "
            f"{verify.get('quantised_base_logits_top1_agreement')}"
        )
    mfu = summary.get("mfu")
    print(
        f"  throughput: {summary.get('tokens_per_s')} tokens/s, {summary.get('tflops_per_device')} TFLOP/s/device, "
        f"MFU {summary.get('mfu_reason') if mfu is None else format(mfu, '.1%')}, goodput {summary.get('goodput')}"
    )
    samples = Path(summary.get("kept_dir", "")) / "samples.md"
    print(f"  {describe_learning(summary) or 'no held-out loss was measured'}")
    # The benchmarks of both models (docs/eval.md): the fixture tasks, scored by lm-eval's own code.
    print(f"  {outcome_line('eval', summary) or 'no eval ran'}")
    print(f"  before/after answers: {samples}\n")
    print(samples.read_text(encoding="utf-8") if samples.is_file() else "  (no samples.md was kept)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
