"""python -m rehearsal.fresh_vm: the first `pulumi up` against a simulated new Compute Engine VM, no cloud.

  1. evaluates the real Pulumi program (rehearsal/Pulumi.rehearsal.yaml, tiny profile) under the mock engine, the
     dataset a local JSON Lines file with a share held out (DIR/chats.jsonl), and writes the file's copies into
     the stack's bucket as pulumi-gcp would;
  2. creates a VM from what it declared: a Debian bookworm boot disk (debootstrap, cached in
     ~/.cache/tpu-sft/rootfs), its own namespaces and loopback address, sshd answering late, the login user
     of the `ssh-keys` metadata made later still, the `startup-script` formatting and mounting the data disk
     (a loop device);
  3. runs the recorded post-deploy commands at once, as `pulumi up` does: the real bootstrap (apt from Debian,
     uv and MaxText 0.2.3 from PyPI, with the substitutions it prints), then convert and train, checkpoints
     going to the stack's bucket (gcp-storage-emulator on this machine);
  4. deletes the VM once a checkpoint is in the bucket (a preemption), creates it again on the same data disk
     and runs every command on it: training resumes from the bucket; then runs them all again (a further `up`
     finds everything done), deletes the VM, creates it again, checks that the kept model is still there, and
     runs every command on that VM once more: nothing is redone and the kept model's bytes do not change;
  5. prints how each first-boot hazard was met, and where the new VM's training resumed.

Needs: root, debootstrap (scripts/rehearse --fresh-vm installs it), .venv, pyenv's Python 3.12.1, uv's cache
for speed. Leaves: DIR/chats.jsonl (the user's conversations), DIR/data-disk.img (the data disk, with the
model), DIR/boot-*-console.log (each boot's console) and DIR/client (the throwaway SSH key); no VM, mount or loop
device.
Exit status: 0 done, 1 a step failed (the message says which), 2 bad input.
"""

from __future__ import annotations

import sys
import time

from rehearsal import cli
from rehearsal.fresh_vm.evidence import report
from rehearsal.fresh_vm.rehearse import RehearsalFailed, rehearse
from workload.core.contract import EXIT_BAD_INPUT


def main(argv: list[str] | None = None) -> int:
    parser = cli.parser("python -m rehearsal.fresh_vm", __doc__, "runs/fresh-vm")
    cli.add_steps(parser)
    args = parser.parse_args(argv)
    if cli.bad_steps(args.steps):
        return EXIT_BAD_INPUT
    started = time.monotonic()
    try:
        run = rehearse(args.dir.resolve(), steps=args.steps)
    except RehearsalFailed as e:
        print(f"\nfresh-vm: {e}. Fix what it names and run again.", file=sys.stderr)
        return 1
    print(f"\nfresh-vm rehearsal done in {time.monotonic() - started:.0f} s; first-boot hazards met:")
    for line in report(run, user="tpu-sft"):
        print(f"  {line}")
    print(
        f"  model: {run.summary.get('kept_dir')} (on {args.dir}/data-disk.img); final step "
        f"{run.summary.get('final_step')}, loss {run.summary.get('final_loss')}; "
        f"verify {'passed' if (run.summary.get('verify') or {}).get('ok') else 'FAILED'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
