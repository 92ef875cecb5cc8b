"""Run in the MaxText venv (gcsfs), as the VM's service account: a runner's events, copied beside the run's
checkpoints by workload/run/log_mirror.py; then it hangs, as a VM does until it is lost.

    python run_log_writer.py RUN_DIR TOKEN   (TOKEN: the HF token the copy must not hold)
"""

import sys
import time

from workload.launch.hf_token import redactor
from workload.run.events import Events
from workload.run.log_mirror import mirrored

run_dir, token = sys.argv[1:3]
events = Events()
with mirrored(events, run_dir, redactor(token), leader=True):
    events.emit("phase", phase="convert", status="done", seconds=12.0)
    events.emit("phase", phase="train", status="start", reason=f"not done yet (token {token})")
    events.emit("step", phase="train", step=3, steps=10, loss=1.2345, step_seconds=1.0, eta_s=70.0)
    events.emit("eval", phase="train", step=3, eval_loss=2.5)
    print("emitted", file=sys.stderr, flush=True)
    while True:
        time.sleep(60)
